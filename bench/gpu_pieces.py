"""Files too big for one device call, sent over several: split into pieces, checked by sha256, put back together.

The lent GPU machine has no network, and a call carries at most 64 MiB of working tree (the tracked files included).
The real base weights (SmolLM2's GGUF, 98 MB; MiniLM in fp16, 45 MB), the training pairs and the dev data do not
fit in one call, so they travel in pieces over consecutive calls while the machine stays warm (30 s between calls).
Standard library only: it runs on the device before anything else is importable.

Here (the sender):

    python bench/gpu_pieces.py split ITEM... --send runs/gpu-send      # pieces, manifest.json, call-NN/ folders
    python bench/gpu_pieces.py resend --send runs/gpu-send --status STATUS.json   # only the missing pieces

On the device, in each call (``carry=["runs/gpu-send/call-NN"]``):

    python3 bench/gpu_pieces.py receive --send runs/gpu-send --store /tmp/c2v-gpu-store --status $OUT/status.json
    python3 bench/gpu_pieces.py assemble --store /tmp/c2v-gpu-store          # every item, sha256 checked

``receive`` checks each carried piece's size and sha256 against the manifest and moves the good ones into the
store (outside the repository copy, so nothing a later call copies can replace them); it writes which pieces are
there and which are missing. A machine that went back between calls comes back bare: its store is empty, the
status names the pieces it lacks, and ``resend`` makes new call folders of exactly those. ``assemble`` joins the
pieces of each item and checks the whole item's sha256 before anything uses it.

``plan`` says how many bytes a call can carry beside the working tree: 64 MiB less the tracked and untracked
(not ignored) files of the repository the device copies, less the other carried paths, less a margin.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

MIB = 2**20
TREE_LIMIT = 64 * MIB  # what one device call carries: tracked + untracked-not-ignored files + carried paths
DEFAULT_PIECE = 8 * MIB  # small enough that a resend packs missing pieces tightly
MARGIN = 2 * MIB  # files that appear in the tree between planning and the call (logs, notes)
MANIFEST = "manifest.json"


def sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(4 * MIB), b""):
            digest.update(block)
    return digest.hexdigest()


@dataclass(frozen=True)
class Piece:
    item: str
    index: int
    size: int
    sha256: str

    @property
    def name(self) -> str:
        return f"{self.item}.part{self.index:03d}"


def load_manifest(send: Path) -> dict[str, Any]:
    return json.loads((send / MANIFEST).read_text(encoding="utf-8"))


def manifest_pieces(manifest: dict[str, Any]) -> list[Piece]:
    return [
        Piece(item, i, part["size"], part["sha256"])
        for item, entry in manifest["items"].items()
        for i, part in enumerate(entry["parts"])
    ]


# ------------------------------------------------------------------------------------------------ sender


def tree_bytes(repo: Path) -> int:
    """Bytes of the files a device call copies: tracked plus untracked files git does not ignore."""
    listing = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=repo,
        capture_output=True,
        check=True,
    ).stdout
    total = 0
    for name in listing.decode("utf-8", errors="surrogateescape").split("\0"):
        path = repo / name
        if name and path.is_file() and not path.is_symlink():
            total += path.stat().st_size
    return total


def path_bytes(path: Path) -> int:
    if path.is_file():
        return path.stat().st_size
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


def call_capacity(repo: Path, other_carry: Sequence[Path] = ()) -> int:
    """Bytes of pieces one call can carry beside the working tree and ``other_carry``."""
    used = tree_bytes(repo) + sum(path_bytes(p) for p in other_carry if p.exists()) + MARGIN
    return TREE_LIMIT - used


def pack_calls(pieces: Iterable[Piece], capacity: int, overhead: int) -> list[list[Piece]]:
    """Pieces in order, into as few calls as fit ``capacity`` each (first fit, order kept within a call)."""
    calls: list[list[Piece]] = []
    room: list[int] = []
    for piece in pieces:
        if piece.size + overhead > capacity:
            raise SystemExit(f"{piece.name}: {piece.size} bytes do not fit a call's {capacity} (lower --piece-mib)")
        for i, left in enumerate(room):
            if piece.size <= left:
                calls[i].append(piece)
                room[i] -= piece.size
                break
        else:
            calls.append([piece])
            room.append(capacity - overhead - piece.size)
    return calls


def write_call(send: Path, name: str, pieces: Sequence[Piece]) -> Path:
    """A call folder: its pieces (hard links to the split's, no copy) and the manifest, which every call carries so
    that the device can check what arrives whatever came before."""
    folder = send / name
    if folder.exists():
        shutil.rmtree(folder)
    folder.mkdir(parents=True)
    for piece in pieces:
        source = send / "pieces" / piece.name
        try:
            os.link(source, folder / piece.name)
        except OSError:  # another filesystem: copy
            shutil.copy2(source, folder / piece.name)
    shutil.copy2(send / MANIFEST, folder / MANIFEST)
    return folder


def split(items: Sequence[Path], send: Path, piece_bytes: int, capacity: int, notes: dict[str, Any]) -> dict[str, Any]:
    """Split ``items`` into pieces under ``send/pieces``, write the manifest and the call folders ``call-NN``."""
    if send.exists():
        shutil.rmtree(send)
    (send / "pieces").mkdir(parents=True)
    # "created" tells this split's manifest from a stale one a warm device may still hold in an older call folder
    manifest: dict[str, Any] = {"created": time.time(), "piece_bytes": piece_bytes, "capacity": capacity, "items": {}}
    manifest.update(notes)
    for item in items:
        parts = []
        with item.open("rb") as handle:
            for index, block in enumerate(iter(lambda: handle.read(piece_bytes), b"")):
                piece = Piece(item.name, index, len(block), hashlib.sha256(block).hexdigest())
                (send / "pieces" / piece.name).write_bytes(block)
                parts.append({"size": piece.size, "sha256": piece.sha256})
        manifest["items"][item.name] = {"size": item.stat().st_size, "sha256": sha256_file(item), "parts": parts}
    overhead = 64 * 1024  # the manifest each call carries
    calls = pack_calls(manifest_pieces(manifest), capacity, overhead)
    manifest["calls"] = {f"call-{i + 1:02d}": [p.name for p in call] for i, call in enumerate(calls)}
    (send / MANIFEST).write_text(json.dumps(manifest, indent=2) + "\n", encoding="utf-8")
    by_name = {p.name: p for p in manifest_pieces(manifest)}
    for name, names in manifest["calls"].items():
        write_call(send, name, [by_name[n] for n in names])
    return manifest


def resend(send: Path, status: dict[str, Any], capacity: int) -> dict[str, list[str]]:
    """New call folders ``resend-NN`` holding only the pieces ``status`` says the device lacks."""
    manifest = load_manifest(send)
    missing = set(status["missing"]) | set(status.get("bad", []))
    pieces = [p for p in manifest_pieces(manifest) if p.name in missing]
    for old in send.glob("resend-*"):
        shutil.rmtree(old)
    calls = pack_calls(pieces, capacity, 64 * 1024)
    out = {}
    for i, call in enumerate(calls):
        name = f"resend-{i + 1:02d}"
        write_call(send, name, call)
        out[name] = [p.name for p in call]
    return out


# ------------------------------------------------------------------------------------------------ receiver


def _inbox_manifest(send: Path) -> dict[str, Any] | None:
    """The newest manifest under ``send``: every call folder carries its split's; folders of an older split may still
    lie on a warm device."""
    paths = [send / MANIFEST, *send.glob(f"*/{MANIFEST}")]
    found = [json.loads(p.read_text(encoding="utf-8")) for p in paths if p.is_file()]
    return max(found, key=lambda m: m.get("created", 0.0)) if found else None


def receive(send: Path, store: Path) -> dict[str, Any]:
    """Check the pieces carried under ``send`` and move the good ones into ``store``; what is there and missing."""
    manifest = _inbox_manifest(send)
    if manifest is None:
        stored = store / MANIFEST
        if not stored.is_file():
            raise SystemExit(f"no {MANIFEST} under {send} or {store}: carry a call folder")
        manifest = json.loads(stored.read_text(encoding="utf-8"))
    store.mkdir(parents=True, exist_ok=True)
    stored_manifest = store / MANIFEST
    if stored_manifest.is_file():
        old = json.loads(stored_manifest.read_text(encoding="utf-8"))
        if old["items"] != manifest["items"]:  # another split: the old pieces belong to other files
            shutil.rmtree(store)
            store.mkdir(parents=True)
    (store / MANIFEST).write_text(json.dumps(manifest, indent=2) + "\n", encoding="utf-8")
    expected = {p.name: p for p in manifest_pieces(manifest)}

    def stored(name: str) -> bool:
        """Checked when it arrived (its marker) and still whole (its size): hashing 200 MB each call costs seconds."""
        path = store / "pieces" / name
        return (
            (store / "pieces" / f"{name}.ok").is_file()
            and path.is_file()
            and path.stat().st_size == expected[name].size
        )

    received, bad = [], []
    for path in sorted(send.glob("*/*.part[0-9][0-9][0-9]")):
        piece = expected.get(path.name)
        if piece is None:
            continue
        target = store / "pieces" / path.name
        if stored(path.name):
            continue  # checked in an earlier call
        if path.stat().st_size != piece.size or sha256_file(path) != piece.sha256:
            bad.append(path.name)
            continue
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(path, target)  # copy, not move: the carried folder is the device tool's to replace
        (store / "pieces" / f"{path.name}.ok").write_text(piece.sha256, encoding="utf-8")
        received.append(path.name)
    present = [n for n in expected if stored(n)]
    missing = [n for n in expected if n not in present]
    return {
        "received": received,
        "bad": bad,
        "present": len(present),
        "missing": missing,
        "complete": not missing,
        "bytes_present": sum(expected[n].size for n in present),
        "bytes_total": sum(p.size for p in expected.values()),
    }


def assemble(store: Path, out: Path | None = None) -> dict[str, Path]:
    """Each item joined from its pieces into ``out`` (default ``store/items``), its sha256 checked; items already
    joined and checked are kept."""
    manifest = json.loads((store / MANIFEST).read_text(encoding="utf-8"))
    out = out or store / "items"
    out.mkdir(parents=True, exist_ok=True)
    paths = {}
    for item, entry in manifest["items"].items():
        target = out / item
        marker = out / f"{item}.ok"
        if not (target.is_file() and marker.is_file() and marker.read_text(encoding="utf-8") == entry["sha256"]):
            tmp = out / f"{item}.tmp"
            with tmp.open("wb") as handle:
                for i in range(len(entry["parts"])):
                    part = store / "pieces" / f"{item}.part{i:03d}"
                    if not (store / "pieces" / f"{part.name}.ok").is_file():
                        raise SystemExit(f"{part.name} has not arrived: resend it (gpu_pieces.py resend)")
                    with part.open("rb") as piece:
                        shutil.copyfileobj(piece, handle)
            digest = sha256_file(tmp)
            if digest != entry["sha256"]:
                tmp.unlink()
                raise SystemExit(f"{item}: sha256 {digest} after joining, expected {entry['sha256']}")
            tmp.replace(target)
            marker.write_text(entry["sha256"], encoding="utf-8")
        paths[item] = target
    return paths


def join_parts(parts: Sequence[Path], expected_sha256: str, target: Path) -> Path:
    """Join the parts a device call sent back (in order) into ``target``, checking the whole file's sha256."""
    with target.open("wb") as handle:
        for part in parts:
            with part.open("rb") as piece:
                shutil.copyfileobj(piece, handle)
    digest = sha256_file(target)
    if digest != expected_sha256:
        target.unlink()
        raise SystemExit(f"{target.name}: sha256 {digest} after joining, expected {expected_sha256}")
    return target


# ------------------------------------------------------------------------------------------------ CLI


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    p_split = sub.add_parser("split", help="split items into pieces and call folders (here)")
    p_split.add_argument("items", nargs="+", type=Path)
    p_split.add_argument("--send", type=Path, default=Path("runs/gpu-send"))
    p_split.add_argument("--piece-mib", type=float, default=DEFAULT_PIECE / MIB)
    p_split.add_argument("--capacity-mib", type=float, help="bytes a call carries (default: measured, `plan`)")
    p_split.add_argument("--carry", type=Path, action="append", default=[], help="other carried paths, e.g. .whl")
    p_resend = sub.add_parser("resend", help="call folders of the pieces a status lacks (here)")
    p_resend.add_argument("--send", type=Path, default=Path("runs/gpu-send"))
    p_resend.add_argument("--status", type=Path, required=True, help="the status.json a device call wrote")
    p_resend.add_argument("--capacity-mib", type=float)
    p_resend.add_argument("--carry", type=Path, action="append", default=[])
    p_plan = sub.add_parser("plan", help="bytes of pieces a call can carry from this repository (here)")
    p_plan.add_argument("--carry", type=Path, action="append", default=[])
    for name in ("receive", "assemble"):
        p = sub.add_parser(name, help=f"{name} on the device")
        p.add_argument("--send", type=Path, default=Path("runs/gpu-send"))
        p.add_argument("--store", type=Path, default=Path("/tmp/c2v-gpu-store"))
        p.add_argument("--status", type=Path, help="also write the status here (e.g. $OUT/status.json)")
    args = parser.parse_args(argv)
    repo = Path.cwd()

    def capacity() -> int:
        if getattr(args, "capacity_mib", None):
            return int(args.capacity_mib * MIB)
        return call_capacity(repo, args.carry)

    if args.command == "plan":
        print(json.dumps({"tree_bytes": tree_bytes(repo), "capacity_bytes": capacity()}))
    elif args.command == "split":
        manifest = split(args.items, args.send, int(args.piece_mib * MIB), capacity(), {})
        for name, names in manifest["calls"].items():
            print(f"{args.send / name}: {len(names)} pieces")
    elif args.command == "resend":
        status = json.loads(args.status.read_text(encoding="utf-8"))
        for name, names in resend(args.send, status, capacity()).items():
            print(f"{args.send / name}: {', '.join(names)}")
    elif args.command == "receive":
        status = receive(args.send, args.store)
        text = json.dumps(status, indent=2)
        if args.status:
            args.status.write_text(text + "\n", encoding="utf-8")
        print(text)
        return 0 if status["complete"] else 3  # 3: not all there yet (the next calls bring the rest)
    elif args.command == "assemble":
        for item, path in assemble(args.store).items():
            print(f"{item}: {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
