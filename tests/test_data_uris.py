"""One rule for what a data URI is: the key scan and the paper copy both step over embedded
base64 through :mod:`evalnb.core.data_uris`, and no other module spells the pattern."""

from __future__ import annotations

import re
from pathlib import Path

from evalnb.pages.paper import relative_paths
from evalnb.records.keyscan import scan_text, text_of, without_image_data

KEY_SHAPED = "AIza" + "Q" * 35   # base64 letters only: what a PNG's base64 can hold by chance
PACKAGE = Path(__file__).resolve().parent.parent / "evalnb"


def test_the_key_scan_leaves_out_an_images_base64_and_searches_any_other_data_uri() -> None:
    page = (f'<img src="data:image/png;base64,iVBOR{KEY_SHAPED}=="> '
            f'<img src="data:image/svg+xml;base64,PHN2Zy{KEY_SHAPED}"> '
            f'<a href="data:text/plain;base64,{KEY_SHAPED}">a note</a>')
    assert without_image_data(page) == (f'<img src="data:"> <img src="data:"> '
                                        f'<a href="data:text/plain;base64,{KEY_SHAPED}">a note</a>')
    # text, not an image: a key there is a key someone reads
    assert [f.kind for f in scan_text("page.html", text_of(Path("page.html"), page.encode()) or "")] == ["AIza…"]


def test_the_paper_copy_leaves_every_data_uri_alone(tmp_path: Path) -> None:
    record = tmp_path / "cmp"
    text = (f"{record}/a.png data:image/png;base64,iVBO/tmp/x/y== data:text/plain;base64,/home/u/z== "
            f"{tmp_path}/elsewhere/b.json")
    assert relative_paths(text, record, [record]) == ("a.png data:image/png;base64,iVBO/tmp/x/y== "
                                                      "data:text/plain;base64,/home/u/z== b.json")


def test_one_module_defines_what_a_data_uri_is() -> None:
    """The pattern's payload (``;base64,`` then the base64 letters) is written in one module."""
    payload = re.compile(r";base64,\[A-Za-z0-9")
    spelled = [path.relative_to(PACKAGE).as_posix() for path in sorted(PACKAGE.rglob("*.py"))
               if payload.search(path.read_text(encoding="utf-8"))]
    assert spelled == ["core/data_uris.py"]
