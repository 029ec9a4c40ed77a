"""``evalnb pack RUN_DIR [-o FILE]``: the record a paper needs, as one archive.

The archive (``.tar.gz`` or ``.zip``, by the suffix of ``-o``; default ``RUN_DIR.tar.gz``
beside the run directory) holds every file of the run directory under one folder named
after it: the executed notebooks and their HTML, ``scores.json``, ``evidence.json``,
``tasks.html``, ``responses.json``, the stores, ``config.json``, the manifest and the
fingerprint, the figures and any paper-ready HTML. ``SHA256SUMS`` in that folder lists
every other member's sha256 (``sha256sum -c SHA256SUMS`` checks it); ``evalnb verify
ARCHIVE`` checks it first.

Decisions: nothing outside the run directory goes in, and no link is followed (a link is
left out, and said so); hidden files (the run's lock files, a writer's temporary files) are
not part of the record. The inputs (data, corpus, prompt files) are not packed: they are
the data set's, and the fingerprint holds their hashes, which ``verify`` checks wherever the
reader has them. Packing is refused, naming the file and line, when any file holds a
key-shaped string. The archive is written whole or not at all.
"""

from __future__ import annotations

import hashlib
import io
import os
import secrets
import sys
import tarfile
import zipfile
from collections.abc import Iterator
from pathlib import Path, PurePosixPath

from evalnb.core.errors import ConfigError
from evalnb.records.keyscan import scan_file

SUMS = "SHA256SUMS"
ARCHIVE_SUFFIXES = (".tar.gz", ".tgz", ".zip")


def sha256_of(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def members(run_dir: Path) -> Iterator[tuple[Path, str]]:
    """(file, its name under the run directory) for every file of the record, sorted."""
    for root, dirs, files in os.walk(run_dir):   # links to folders are not walked into
        dirs[:] = sorted(d for d in dirs if not d.startswith(".") and not (Path(root) / d).is_symlink())
        for link in (d for d in os.listdir(root) if (Path(root) / d).is_symlink()):
            print(f"evalnb pack: left out {Path(root) / link}: a link (nothing outside the run directory goes in)",
                  file=sys.stderr)
        for name in sorted(files):
            path = Path(root) / name
            if name.startswith(".") or path.is_symlink() or not path.is_file():
                continue
            relative = path.relative_to(run_dir).as_posix()
            if relative != SUMS:
                yield path, relative


def sums_text(entries: list[tuple[str, bytes]]) -> str:
    return "".join(f"{sha256_of(data)}  {name}\n" for name, data in entries)


def pack(run_dir: Path, out: Path | None = None) -> Path:
    """Write the archive; returns its path. ConfigError when the record cannot be packed."""
    run_dir = run_dir.resolve()
    if not run_dir.is_dir() or not (run_dir / "config.json").exists():
        raise ConfigError(f"pack: {run_dir} is not a run directory (no config.json)")
    from evalnb.app.record.compare import refuse_unfinished

    refuse_unfinished("pack", run_dir)
    target = (out or run_dir.with_name(run_dir.name + ".tar.gz")).resolve()
    if not target.name.endswith(ARCHIVE_SUFFIXES):
        raise ConfigError(f"pack: {target}: the name must end in {', '.join(ARCHIVE_SUFFIXES)}")
    if run_dir in target.parents:
        raise ConfigError(f"pack: {target}: the archive cannot be written inside the run directory it packs")
    entries: list[tuple[str, bytes]] = []
    found = []
    for path, name in members(run_dir):
        data = path.read_bytes()
        found += [str(f) for f in scan_file(path, f"{run_dir.name}/{name}", data)]
        entries.append((name, data))
    if found:
        raise ConfigError(f"pack: refusing to pack {run_dir}: {found[0]}"
                          + (f" (and {len(found) - 1} more)" if len(found) > 1 else ""))
    entries.append((SUMS, sums_text(entries).encode()))
    top = run_dir.name
    target.parent.mkdir(parents=True, exist_ok=True)
    # A name of its own beside the target, opened like any new file (so it follows the umask).
    tmp = target.with_name(f".{target.name}.{secrets.token_hex(6)}.tmp")
    try:
        with tmp.open("xb") as f:
            if target.name.endswith(".zip"):
                with zipfile.ZipFile(f, "w", compression=zipfile.ZIP_DEFLATED) as archive:
                    for name, data in entries:
                        archive.writestr(f"{top}/{name}", data)
            else:
                with tarfile.open(fileobj=f, mode="w:gz") as archive:
                    for name, data in entries:
                        info = tarfile.TarInfo(f"{top}/{name}")
                        info.size, info.mode = len(data), 0o644
                        archive.addfile(info, io.BytesIO(data))
        os.replace(tmp, target)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    return target


def _safe(name: str) -> bool:
    path = PurePosixPath(name)
    return bool(name) and not path.is_absolute() and ".." not in path.parts and "\\" not in name


def unpack(archive: Path, dest: Path) -> tuple[Path, list[str]]:
    """The archive's files under ``dest``, and a line for every member refused (a link, a path
    that leaves the folder). Returns the archive's top folder."""
    lines: list[str] = []
    files: dict[str, bytes] = {}
    try:
        if archive.name.endswith(".zip"):
            with zipfile.ZipFile(archive) as z:
                for info in z.infolist():
                    if not info.is_dir():
                        files[info.filename] = z.read(info)
        else:
            with tarfile.open(archive, "r:*") as t:
                for member in t.getmembers():
                    if member.isdir():
                        continue
                    if not member.isfile():
                        lines.append(f"{archive.name}:{member.name}: not a regular file (a link?): left out")
                        continue
                    extracted = t.extractfile(member)
                    files[member.name] = extracted.read() if extracted else b""
    except (tarfile.TarError, zipfile.BadZipFile, OSError, EOFError) as e:
        raise ConfigError(f"verify: {archive}: not a readable archive ({e})") from None
    tops = {PurePosixPath(n).parts[0] for n in files if _safe(n)}
    if len(tops) != 1:
        raise ConfigError(f"verify: {archive}: expected one folder at the top (as evalnb pack writes), found "
                          f"{len(tops)}")
    top = dest / tops.pop()
    for name, data in files.items():
        if not _safe(name):
            lines.append(f"{archive.name}:{name}: a path outside the archive's folder: left out")
            continue
        path = dest / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
    return top, lines


def check_sums(folder: Path, label: str) -> list[str]:
    """Every file of ``folder`` listed in its SHA256SUMS with the sha256 it has, and nothing more."""
    sums = folder / SUMS
    if not sums.exists():
        return [f"{label}/{SUMS}: missing"]
    listed: dict[str, str] = {}
    lines = []
    for number, line in enumerate(sums.read_text("utf-8").splitlines(), start=1):
        digest, sep, name = line.partition("  ")
        if not sep or len(digest) != 64:
            lines.append(f"{label}/{SUMS}, line {number}: not '<sha256>  <file>'")
            continue
        listed[name] = digest
    present = {name for _, name in members(folder)}
    for name in sorted(listed):
        if name not in present:
            lines.append(f"{label}/{name}: listed in {SUMS} but not in the archive")
        elif sha256_of((folder / name).read_bytes()) != listed[name]:
            lines.append(f"{label}/{name}: sha256 differs from {SUMS}")
    lines += [f"{label}/{name}: not listed in {SUMS}" for name in sorted(present - set(listed))]
    return lines


def pack_command(run_dir: Path, out: Path | None) -> int:
    target = pack(run_dir, out)
    print(f"evalnb pack: {target}", file=sys.stderr)
    return 0
