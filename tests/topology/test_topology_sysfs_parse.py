"""The pure sysfs parsers: exact on what the kernel prints, SysfsError (naming the file) on anything else."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from numaplane.topology.cpuset import CPUSet
from numaplane.topology.errors import SysfsError
from numaplane.topology.sysfs_parse import (
    clean,
    parse_bool,
    parse_cpulist,
    parse_cpumask,
    parse_distances,
    parse_hex_id,
    parse_hugepage_size,
    parse_int,
    parse_meminfo,
)

PARSERS: list[Callable[[str, str], Any]] = [
    parse_bool,
    parse_cpulist,
    parse_cpumask,
    parse_distances,
    parse_hex_id,
    parse_hugepage_size,
    parse_int,
    parse_meminfo,
]
FILE = "/sys/devices/system/node/node0/x"

junk = (
    st.text(max_size=80)
    | st.text(alphabet="0123456789abcdefABCDEF,-: x\n\x00kBNodeMmTotal", max_size=80)
    | st.binary(max_size=40).map(lambda b: b.decode("latin-1"))
)


@pytest.mark.parametrize("parser", PARSERS, ids=lambda p: p.__name__)
@given(text=junk)
def test_parsers_raise_only_sysfs_error(parser: Callable[[str, str], Any], text: str) -> None:
    try:
        parser(text, FILE)
    except SysfsError as exc:
        assert exc.file == FILE
        assert str(exc).startswith(FILE)


@given(st.frozensets(st.integers(0, 600), max_size=50))
def test_cpumask_matches_cpulist(cpus: frozenset[int]) -> None:
    s = CPUSet(cpus)
    words = max(1, (max(cpus, default=0) // 32) + 1)
    mask = ",".join(f"{(s.mask >> (32 * i)) & 0xFFFFFFFF:08x}" for i in reversed(range(words + 1)))
    assert parse_cpumask(mask + "\n", FILE) == s
    assert parse_cpulist(s.format() + "\n", FILE) == s


@given(st.lists(st.integers(0, 255), min_size=1, max_size=16))
def test_distances_round_trip(values: list[int]) -> None:
    assert parse_distances(" ".join(map(str, values)) + "\n", FILE) == values


def test_known_formats() -> None:
    assert clean("0-7\n\x00") == "0-7"
    assert parse_cpulist("0-7\n\x00", FILE) == CPUSet(range(8))
    assert parse_cpulist("\n", FILE) == CPUSet()
    assert parse_cpumask("00000000,000000ff\n", FILE) == CPUSet(range(8))
    assert parse_cpumask("0000,00000000,00000000,00ffffff,ffffffff,ffffffff\n", FILE) == CPUSet(range(88))
    assert parse_int("-1\n", FILE) == -1
    assert parse_bool("1\n", FILE) is True and parse_bool("0", FILE) is False
    assert parse_hex_id("0x8086\n", FILE) == "8086" and parse_hex_id("0x020000", FILE) == "020000"
    assert parse_hugepage_size("hugepages-2048kB", FILE) == 2 << 20
    assert parse_hugepage_size("hugepages-1048576kB", FILE) == 1 << 30
    node = "Node 0 MemTotal:       16769836 kB\nNode 0 MemFree:        16087204 kB\nNode 0 HugePages_Total:     0\n"
    info = parse_meminfo("\n" + node, FILE)
    assert info["MemTotal"] == 16769836 * 1024 and info["HugePages_Total"] == 0
    assert parse_meminfo("MemTotal:  1024 kB\nActive(anon): 4 kB\n", FILE) == {
        "MemTotal": 1 << 20,
        "Active(anon)": 4096,
    }


@pytest.mark.parametrize(
    ("parser", "text"),
    [
        (parse_cpulist, "3-1"),
        (parse_cpulist, "0-3,a"),
        (parse_cpumask, ""),
        (parse_cpumask, "ff,xyz"),
        (parse_cpumask, "123456789"),
        (parse_int, "1.5"),
        (parse_int, ""),
        (parse_int, "9" * 30),
        (parse_bool, "2"),
        (parse_distances, ""),
        (parse_distances, "10 -1"),
        (parse_hex_id, "0xzz"),
        (parse_hugepage_size, "hugepages-0kB"),
        (parse_hugepage_size, "hugepages-2MB"),
        (parse_meminfo, "Node 0 MemTotal: lots"),
    ],
)
def test_malformed_content_names_the_file(parser: Callable[[str, str], Any], text: str) -> None:
    with pytest.raises(SysfsError) as info:
        parser(text, FILE)
    assert info.value.file == FILE
