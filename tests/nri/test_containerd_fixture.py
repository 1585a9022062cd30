"""The real-containerd fixture's machinery that runs anywhere (no root, no network)."""

from __future__ import annotations

import hashlib
import io
import json
import socket
import tarfile
from pathlib import Path

import pytest

from numaplane_harness import busyboximage
from numaplane_harness import containerd as ctrd
from numaplane_harness.cri import strip_gogoproto


def test_strip_gogoproto() -> None:
    text = """syntax = "proto3";
package runtime.v1;
import "github.com/gogo/protobuf/gogoproto/gogo.proto";
option (gogoproto.marshaler_all) = true;
option (gogoproto.sizer_all) =  true;
message A { string x = 1 [(gogoproto.nullable) = false, (gogoproto.customname) = "X"]; }
"""
    out = strip_gogoproto(text)
    assert "gogo" not in out
    assert "message A { string x = 1; }" in out and "package runtime.v1;" in out


def test_busybox_image_layout(tmp_path: Path) -> None:
    fake = tmp_path / "busybox"
    fake.write_text("#!/bin/sh\necho 'sh\nsleep\nls'\n")
    fake.chmod(0o755)
    out = busyboximage.build_busybox_image(fake, tmp_path / "img.tar")
    with tarfile.open(out) as tar:
        files = {m.name: tar.extractfile(m).read() for m in tar.getmembers() if m.isfile()}  # type: ignore[union-attr]
    index = json.loads(files["index.json"])
    names = {m["annotations"]["io.containerd.image.name"] for m in index["manifests"]}
    assert names == {busyboximage.BUSYBOX_IMAGE, busyboximage.PAUSE_IMAGE}
    for path, data in files.items():
        if path.startswith("blobs/sha256/"):
            assert hashlib.sha256(data).hexdigest() == path.rsplit("/", 1)[1]
    for desc in index["manifests"]:
        manifest = json.loads(files[f"blobs/sha256/{desc['digest'].split(':')[1]}"])
        config = json.loads(files[f"blobs/sha256/{manifest['config']['digest'].split(':')[1]}"])
        (layer,) = manifest["layers"]
        assert config["rootfs"]["diff_ids"] == [layer["digest"]]  # uncompressed: diff id = digest
        with tarfile.open(fileobj=io.BytesIO(files[f"blobs/sha256/{layer['digest'].split(':')[1]}"])) as lt:
            members = {m.name: m for m in lt.getmembers()}
        assert members["bin/busybox"].isfile() and members["bin/sleep"].issym()
        assert members["bin/ls"].linkname == "busybox"
    pause = next(
        m for m in index["manifests"] if m["annotations"]["io.containerd.image.name"] == busyboximage.PAUSE_IMAGE
    )
    pause_manifest = json.loads(files[f"blobs/sha256/{pause['digest'].split(':')[1]}"])
    pause_config = json.loads(files[f"blobs/sha256/{pause_manifest['config']['digest'].split(':')[1]}"])
    assert pause_config["config"]["Cmd"] == ["sleep", "infinity"]


def test_unavailable_reasons(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(ctrd.os, "geteuid", lambda: 1000)
    reason = ctrd.containerd_unavailable_reason()
    assert reason is not None and "root" in reason


def test_cache_root_honours_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("NUMAPLANE_CACHE", str(tmp_path))
    assert ctrd.cache_root() == tmp_path / "containerd"


def test_run_containerd_cleanup_removes_only_dead_sockets(tmp_path: Path) -> None:
    run = tmp_path / "run"
    (run / "s").mkdir(parents=True)
    (run / "keep.txt").write_text("someone else's")
    dead = socket.socket(socket.AF_UNIX)
    dead.bind(str(run / "s" / "dead"))
    dead.close()
    live = socket.socket(socket.AF_UNIX)
    live.bind(str(run / "s" / "live"))
    live.listen()
    try:
        ctrd._clean_run_containerd({"keep.txt"}, run)
        assert sorted(p.name for p in (run / "s").iterdir()) == ["live"]
        assert (run / "keep.txt").exists()
    finally:
        live.close()
    ctrd._clean_run_containerd(set(), run)
    assert not (run / "s").exists() and (run / "keep.txt").exists()
