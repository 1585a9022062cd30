"""Read a Go pprof CPU profile (gzipped ``profile.proto``) and print the functions that took the time.

A bench tool (``bench/live_schedulers.py`` fetches kube-scheduler's ``/debug/pprof/profile``); no Go
toolchain. The protobuf package (a numaplane dependency) decodes it, through a descriptor of the few
fields of ``perftools.profiles.Profile`` this reads, built here (facts of the public ``profile.proto``:
``sample_type`` = 1, ``sample`` = 2 with ``location_id`` = 1 and ``value`` = 2, ``location`` = 4 with
``id`` = 1 and ``line`` = 4 holding ``function_id`` = 1, ``function`` = 5 with ``id`` = 1 and ``name`` = 2,
``string_table`` = 6); the other fields are skipped as unknown.

``flat`` is the share of CPU samples whose innermost frame is the function, ``cum`` the share of samples
with the function anywhere on the stack (counted once per sample). ``--group`` adds the cumulative share
of named groups of functions (substring matches, e.g. ``encoding/json``).

Usage: ``python bench/pprof_top.py PROFILE [--top N] [--group NAME=SUBSTR,SUBSTR ...]``
"""

from __future__ import annotations

import argparse
import gzip
import sys
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from google.protobuf import descriptor_pb2, descriptor_pool, message_factory
from google.protobuf.message import DecodeError, Message


def _profile_class() -> type[Message]:
    """The message class of the fields read (a descriptor made in code, no generated module)."""
    f = descriptor_pb2.FieldDescriptorProto
    file = descriptor_pb2.FileDescriptorProto(name="numaplane_bench_pprof.proto", package="numaplane.bench.pprof")

    def message(name: str, *fields: tuple[str, int, int, str]) -> None:
        proto = file.message_type.add(name=name)
        for field_name, number, kind, type_name in fields:
            field = proto.field.add(name=field_name, number=number, label=f.LABEL_REPEATED, type=kind)
            if type_name:
                field.type_name = type_name

    message("ValueType", ("type", 1, f.TYPE_INT64, ""))
    message("Sample", ("location_id", 1, f.TYPE_UINT64, ""), ("value", 2, f.TYPE_INT64, ""))
    message("Line", ("function_id", 1, f.TYPE_UINT64, ""))
    message("Location", ("id", 1, f.TYPE_UINT64, ""), ("line", 4, f.TYPE_MESSAGE, ".numaplane.bench.pprof.Line"))
    message("Function", ("id", 1, f.TYPE_UINT64, ""), ("name", 2, f.TYPE_INT64, ""))
    message(
        "Profile",
        ("sample_type", 1, f.TYPE_MESSAGE, ".numaplane.bench.pprof.ValueType"),
        ("sample", 2, f.TYPE_MESSAGE, ".numaplane.bench.pprof.Sample"),
        ("location", 4, f.TYPE_MESSAGE, ".numaplane.bench.pprof.Location"),
        ("function", 5, f.TYPE_MESSAGE, ".numaplane.bench.pprof.Function"),
        ("string_table", 6, f.TYPE_STRING, ""),
    )
    for proto in file.message_type:  # singular where profile.proto has one value
        for field in proto.field:
            if (proto.name, field.name) in {
                ("Location", "id"),
                ("Function", "id"),
                ("Function", "name"),
                ("Line", "function_id"),
                ("ValueType", "type"),
            }:
                field.label = f.LABEL_OPTIONAL
    pool = descriptor_pool.DescriptorPool()
    pool.Add(file)
    return message_factory.GetMessageClass(pool.FindMessageTypeByName("numaplane.bench.pprof.Profile"))


@dataclass
class Profile:
    """Stacks (innermost function first) with their CPU nanoseconds."""

    samples: list[tuple[tuple[str, ...], int]]

    @property
    def total(self) -> int:
        return sum(v for _, v in self.samples)


def read_profile(data: bytes) -> Profile:
    """Decode a pprof CPU profile (gzipped or not); the sample value used is the last (``cpu``, ns)."""
    if data[:2] == b"\x1f\x8b":
        data = gzip.decompress(data)
    message: Any = _profile_class()()
    try:
        message.ParseFromString(data)
    except DecodeError as exc:
        raise ValueError(f"not a profile.proto message: {exc}") from exc
    strings = list(message.string_table)
    functions = {fn.id: fn.name for fn in message.function}
    # a location's functions, inlined ones first, as the proto orders its lines
    locations = {loc.id: [line.function_id for line in loc.line] for loc in message.location}
    samples = []
    for sample in message.sample:
        stack = tuple(strings[functions.get(f, 0)] for loc in sample.location_id for f in locations.get(loc, []))
        samples.append((stack, sample.value[-1] if sample.value else 0))
    return Profile(samples)


def top(profile: Profile, count: int) -> tuple[list[tuple[str, int]], list[tuple[str, int]]]:
    """The ``count`` largest (function, ns) by flat and by cumulative time."""
    flat: Counter[str] = Counter()
    cum: Counter[str] = Counter()
    for stack, value in profile.samples:
        if stack:
            flat[stack[0]] += value
        for name in set(stack):
            cum[name] += value
    return flat.most_common(count), cum.most_common(count)


def group_share(profile: Profile, needles: list[str]) -> int:
    """CPU ns of the samples with a frame matching any of ``needles`` (substrings)."""
    return sum(v for stack, v in profile.samples if any(n in f for f in stack for n in needles))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("profile", type=Path)
    parser.add_argument("--top", type=int, default=25)
    parser.add_argument("--group", action="append", default=[], metavar="NAME=SUBSTR,SUBSTR")
    opts = parser.parse_args()
    try:
        profile = read_profile(opts.profile.read_bytes())
    except (OSError, ValueError, IndexError, EOFError) as exc:
        print(f"pprof_top: cannot read {opts.profile}: {exc}")
        return 2
    total = profile.total or 1
    print(f"profile_cpu_seconds: {profile.total / 1e9:.2f} s")
    flat, cum = top(profile, opts.top)
    print("# flat")
    for name, ns in flat:
        print(f"{100 * ns / total:6.1f} %  {name}")
    print("# cum")
    for name, ns in cum:
        print(f"{100 * ns / total:6.1f} %  {name}")
    for spec in opts.group:
        name, _, needles = spec.partition("=")
        share = group_share(profile, [n for n in needles.split(",") if n])
        print(f"group_{name}: {100 * share / total:.1f} %")
    return 0


if __name__ == "__main__":
    sys.exit(main())
