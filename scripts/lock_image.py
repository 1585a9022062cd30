"""Regenerate the image's lock files: ``image/requirements.lock`` and ``image/debian.lock``.

``requirements.lock``: pip resolves numaplane's runtime dependencies for this interpreter (CPython
3.11, manylinux x86_64 wheels only) and its ``--report`` gives each file's sha256; one
``name==version --hash=sha256:<h>`` line each (``pip install --require-hashes`` format).

``debian.lock``: each package of :data:`DEBIAN_PACKAGES` fetched from bookworm with the private apt
configuration; ``package version sha256`` of the ``.deb``.

Review the diff, then commit both; ``numaplane_harness.image`` refuses anything else.
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
#: Debian bookworm's Python 3.11 runtime and the shared libraries it and the wheels load.
DEBIAN_PACKAGES = (
    "libc6",
    "libgcc-s1",
    "libstdc++6",
    "libssl3",
    "zlib1g",
    "libexpat1",
    "libffi8",
    "libbz2-1.0",
    "liblzma5",
    "libcrypt1",
    "libuuid1",
    "libsqlite3-0",
    "media-types",
    "libpython3.11-minimal",
    "libpython3.11-stdlib",
    "python3.11-minimal",
)


def requirements_lock(report_file: Path | None = None) -> str:
    if report_file is None:
        report_file = Path(tempfile.mkdtemp()) / "report.json"
        subprocess.run(
            [
                sys.executable,
                "-m",
                "pip",
                "install",
                "-q",
                "--dry-run",
                "--ignore-installed",
                "--only-binary=:all:",
                "--report",
                str(report_file),
                str(REPO),
            ],
            check=True,
        )
    report = json.loads(report_file.read_text())
    lines = [
        "# numaplane's runtime dependencies for the image (CPython 3.11, linux x86_64 wheels)",
        "# regenerate: python scripts/lock_image.py; installed with pip --require-hashes --no-deps",
    ]
    for item in sorted(report["install"], key=lambda i: i["metadata"]["name"].lower()):
        meta = item["metadata"]
        if meta["name"] == "numaplane":
            continue
        sha = item["download_info"]["archive_info"]["hashes"]["sha256"]
        lines.append(f"{meta['name']}=={meta['version']} --hash=sha256:{sha}")
    return "\n".join(lines) + "\n"


def debian_lock() -> str:
    sys.path.insert(0, str(REPO / "src"))
    sys.path.insert(0, str(REPO / "harness"))  # the test harness is not installed
    from numaplane_harness.debian import cache_base, fetch_debs
    from numaplane_harness.image import SUITE, _sha256

    cache = cache_base() / "image-debs"
    unpacked = fetch_debs(cache, [(p, SUITE) for p in DEBIAN_PACKAGES])
    lines = [f"# Debian {SUITE} packages of the image's base: package version sha256 (python scripts/lock_image.py)"]
    for package in DEBIAN_PACKAGES:
        deb = (unpacked / package / ".done").read_text().strip()
        version = deb.split("_")[1].replace("%3a", ":")
        lines.append(f"{package} {version} {_sha256(cache / 'debs' / deb)}")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    report = Path(sys.argv[1]) if len(sys.argv) > 1 else None
    (REPO / "image" / "requirements.lock").write_text(requirements_lock(report))
    (REPO / "image" / "debian.lock").write_text(debian_lock())
    print("wrote image/requirements.lock and image/debian.lock")
