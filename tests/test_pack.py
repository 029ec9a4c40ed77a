"""``evalnb pack``: one archive of a run's record with SHA256SUMS, checked first by ``evalnb verify``."""

from __future__ import annotations

import hashlib
import io
import os
import shutil
import tarfile
import zipfile
from pathlib import Path

import pytest

from evalnb.app.main import main
from tests.conftest import offline_params
from tests.test_verify import executed_run, verify


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    base = tmp_path_factory.mktemp("pack")
    return executed_run(base, offline_params(base))


def tar_members(archive: Path) -> dict[str, bytes]:
    with tarfile.open(archive, "r:gz") as t:
        return {m.name: t.extractfile(m).read() for m in t.getmembers() if m.isfile()}  # type: ignore[union-attr]


def test_pack_holds_the_record_with_checksums(run_dir: Path, tmp_path: Path,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    archive = tmp_path / "record.tar.gz"
    assert main(["pack", str(run_dir), "-o", str(archive)]) == 0
    members = tar_members(archive)
    top = run_dir.name
    for name in ("01_generate.ipynb", "01_generate.html", "04_report.ipynb", "04_report.html", "scores.json",
                 "evidence.json", "tasks.html", "generate.jsonl", "judge.jsonl", "manifest.json",
                 "fingerprint.json", "config.json", "figures/score_histogram.png", "SHA256SUMS"):
        assert f"{top}/{name}" in members, name
    assert not any(Path(n).name.startswith(".") for n in members)   # the run's lock files are not the record
    # SHA256SUMS lists every other member with its sha256, computed here.
    listed = dict(reversed(line.split("  ", 1)) for line in members[f"{top}/SHA256SUMS"].decode().splitlines())
    assert set(listed) == {n.removeprefix(f"{top}/") for n in members} - {"SHA256SUMS"}
    for name, digest in listed.items():
        assert hashlib.sha256(members[f"{top}/{name}"]).hexdigest() == digest
    assert members[f"{top}/scores.json"] == (run_dir / "scores.json").read_bytes()
    assert verify(archive, capsys=capsys) == (0, [])


def test_the_default_archive_is_beside_the_run_and_zip_by_suffix(run_dir: Path, tmp_path: Path,
                                                                 capsys: pytest.CaptureFixture[str]) -> None:
    copy = tmp_path / "myrun"
    shutil.copytree(run_dir, copy)
    assert main(["pack", str(copy)]) == 0
    assert (tmp_path / "myrun.tar.gz").exists()
    assert main(["pack", str(copy), "-o", str(tmp_path / "myrun.zip")]) == 0
    with zipfile.ZipFile(tmp_path / "myrun.zip") as z:
        assert "myrun/SHA256SUMS" in z.namelist() and "myrun/scores.json" in z.namelist()
    assert verify(tmp_path / "myrun.zip", capsys=capsys) == (0, [])
    assert oct((tmp_path / "myrun.zip").stat().st_mode & 0o777) == oct(0o666 & ~_umask())


def _umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def rewrite(archive: Path, target: Path, name: str, data: bytes) -> None:
    """``archive`` copied to ``target`` with member ``name`` replaced (SHA256SUMS left as it was)."""
    members = tar_members(archive)
    members[name] = data
    with tarfile.open(target, "w:gz") as t:
        for member, content in members.items():
            info = tarfile.TarInfo(member)
            info.size = len(content)
            t.addfile(info, io.BytesIO(content))


def test_an_archive_with_one_member_changed_fails_its_checksum_first(run_dir: Path, tmp_path: Path,
                                                                     capsys: pytest.CaptureFixture[str]) -> None:
    archive = tmp_path / "record.tar.gz"
    assert main(["pack", str(run_dir), "-o", str(archive)]) == 0
    top = run_dir.name
    name = f"{top}/03_aggregate.html"
    changed = tmp_path / "changed.tar.gz"
    rewrite(archive, changed, name, tar_members(archive)[name].replace(b"Aggregate", b"Aggregated", 1))
    code, lines = verify(changed, capsys=capsys)
    assert code == 1
    assert lines[0] == f"changed.tar.gz:{top}/03_aggregate.html: sha256 differs from SHA256SUMS"
    assert any("03_aggregate.html: is not the rendering of 03_aggregate.ipynb" in line for line in lines)


def test_pack_refuses_a_record_holding_a_key(run_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    copy = tmp_path / "leaky"
    shutil.copytree(run_dir, copy)
    (copy / "notes.md").write_text("our key: AIza" + "x" * 35 + "\n", "utf-8")
    capsys.readouterr()
    assert main(["pack", str(copy)]) == 1
    err = capsys.readouterr().err
    assert "refusing to pack" in err and "leaky/notes.md, line 1: a key-shaped string (AIza…)" in err
    assert "x" * 35 not in err
    assert not (tmp_path / "leaky.tar.gz").exists() and not list(tmp_path.glob(".leaky*"))


def test_a_figures_base64_is_no_key_but_its_caption_is_searched(run_dir: Path, tmp_path: Path,
                                                                 capsys: pytest.CaptureFixture[str]) -> None:
    """A figure's PNG is in its notebook output's HTML (and its page's): key-shaped base64 there
    is pixels, not a key; the same string in the caption beside it is refused."""
    from tests.test_verify import edit_figure

    shaped = "AIza" + "Q" * 35   # base64 letters only: what a PNG's base64 can hold by chance
    copy = tmp_path / "pixels"
    shutil.copytree(run_dir, copy)
    edit_figure(copy, lambda page: page.replace("base64,", "base64," + shaped, 1))
    page = (copy / "04_report.html").read_text("utf-8")
    (copy / "04_report.html").write_text(page.replace('src="data:image/png;base64,', 'src="data:image/png;base64,'
                                                      + shaped, 1), "utf-8")
    assert main(["pack", str(copy), "-o", str(tmp_path / "pixels.tar.gz")]) == 0
    edit_figure(copy, lambda page: page.replace("</figcaption>", f" {shaped}</figcaption>"))
    capsys.readouterr()
    assert main(["pack", str(copy)]) == 1
    err = capsys.readouterr().err
    assert "pixels/04_report.ipynb, line " in err and "a key-shaped string (AIza…)" in err and "04_report.html" not in err


def test_nothing_outside_the_run_goes_in(run_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret-notes.txt").write_text("not part of the run\n", "utf-8")
    copy = tmp_path / "linked"
    shutil.copytree(run_dir, copy)
    (copy / "notes-link.txt").symlink_to(outside / "secret-notes.txt")
    (copy / "folder-link").symlink_to(outside)
    capsys.readouterr()
    assert main(["pack", str(copy)]) == 0
    assert "left out" in capsys.readouterr().err
    members = tar_members(tmp_path / "linked.tar.gz")
    assert not any("notes-link" in n or "folder-link" in n for n in members)
    assert all(b"not part of the run" not in data for data in members.values())


def test_verify_refuses_archive_members_that_leave_the_folder(run_dir: Path, tmp_path: Path,
                                                             capsys: pytest.CaptureFixture[str]) -> None:
    archive = tmp_path / "record.tar.gz"
    assert main(["pack", str(run_dir), "-o", str(archive)]) == 0
    evil = tmp_path / "evil.tar.gz"
    rewrite(archive, evil, f"{run_dir.name}/../escaped.txt", b"outside")
    code, lines = verify(evil, capsys=capsys)
    assert code == 1 and any("a path outside the archive's folder: left out" in line for line in lines)
    assert not (tmp_path / "escaped.txt").exists()
