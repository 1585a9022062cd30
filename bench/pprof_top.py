"""Read a Go pprof CPU profile (gzipped ``profile.proto``) and print the functions that took the time.

A bench tool (``bench/live_schedulers.py`` fetches kube-scheduler's ``/debug/pprof/profile``); no Go
toolchain and no protobuf package: the few fields of ``perftools.profiles.Profile`` it needs are read with
a small wire-format decoder (varints and length-delimited fields; facts of the public ``profile.proto``:
``sample`` = 2 with ``location_id`` = 1 and ``value`` = 2, ``location`` = 4 with ``id`` = 1 and ``line`` = 4
holding ``function_id`` = 1, ``function`` = 5 with ``id`` = 1 and ``name`` = 2, ``string_table`` = 6,
``sample_type`` = 1 with ``type`` = 1).

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


def _varint(buf: bytes, i: int) -> tuple[int, int]:
    shift = result = 0
    while True:
        b = buf[i]
        i += 1
        result |= (b & 0x7F) << shift
        if b < 0x80:
            return result, i
        shift += 7


def _fields(buf: bytes) -> list[tuple[int, int | bytes]]:
    """``(field number, value)`` of one message: ints for varints, bytes for length-delimited fields."""
    out: list[tuple[int, int | bytes]] = []
    i = 0
    while i < len(buf):
        key, i = _varint(buf, i)
        number, wire = key >> 3, key & 7
        if wire == 0:
            value, i = _varint(buf, i)
            out.append((number, value))
        elif wire == 2:
            size, i = _varint(buf, i)
            out.append((number, buf[i : i + size]))
            i += size
        elif wire == 1:
            i += 8
        elif wire == 5:
            i += 4
        else:
            raise ValueError(f"unsupported protobuf wire type {wire}")
    return out


def _ints(value: int | bytes) -> list[int]:
    """A repeated integer field: one varint, or a packed run of them."""
    if isinstance(value, int):
        return [value]
    out, i = [], 0
    while i < len(value):
        v, i = _varint(value, i)
        out.append(v)
    return out


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
    strings: list[str] = []
    functions: dict[int, int] = {}
    locations: dict[int, list[int]] = {}
    raw_samples: list[tuple[list[int], list[int]]] = []
    for number, value in _fields(data):
        if number == 6 and isinstance(value, bytes):
            strings.append(value.decode("utf-8", "replace"))
        elif number == 5 and isinstance(value, bytes):
            f = dict(_fields(value))
            functions[int(f.get(1, 0))] = int(f.get(2, 0))
        elif number == 4 and isinstance(value, bytes):
            loc_id, funcs = 0, []
            for n, v in _fields(value):
                if n == 1:
                    loc_id = int(v)
                elif n == 4 and isinstance(v, bytes):
                    funcs.append(int(dict(_fields(v)).get(1, 0)))
            locations[loc_id] = funcs  # inlined functions first, as the proto orders them
        elif number == 2 and isinstance(value, bytes):
            locs: list[int] = []
            values: list[int] = []
            for n, v in _fields(value):
                if n == 1:
                    locs.extend(_ints(v))
                elif n == 2:
                    values.extend(_ints(v))
            raw_samples.append((locs, values))
    samples = []
    for locs, values in raw_samples:
        stack = tuple(strings[functions.get(f, 0)] for loc in locs for f in locations.get(loc, []))
        samples.append((stack, values[-1] if values else 0))
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
