"""Copy bench/long_pages' manuals out of their Debian packages into one folder, and check that c2v_rag reads them
as they were judged.

    apt-get install git-doc ninja-build nettle-dev   # and Node.js 20's docs (/usr/share/doc/nodejs/api)
    python bench/long_pages/build.py [--out FOLDER]

The questions' answers are quotes of the pages as c2v_rag's readers give them; ``pages.json`` records the sha256 of
each page's text so read, and a reader that changed since is named here (the quotes may still be found: score.py
checks each one).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import shutil
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent


def _default_out() -> Path:
    from c2v_rag.core.cache import cache_dir

    return cache_dir() / "long-pages"


DEFAULT_OUT = _default_out()
PAGES = json.loads((HERE / "pages.json").read_text(encoding="utf-8"))


def read_pages(folder: Path) -> dict[str, str]:
    """Each page's file name -> its text as c2v_rag reads it."""
    from c2v_rag.documents.files import read_file
    from c2v_rag.documents.reading import ReadLog, ReadOptions

    texts = {}
    for page in PAGES:
        file = folder / page["file"]
        if not file.exists():
            raise SystemExit(f"{file} is missing: run python bench/long_pages/build.py --out {folder}")
        (document,) = read_file(file, str(folder), ReadOptions(), ReadLog())
        texts[page["file"]] = document.text
    return texts


def digest_of(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def check_digests(texts: dict[str, str]) -> str:
    """The digest of all the pages' texts; a page read otherwise than when judged is named on stderr."""
    for page in PAGES:
        if digest_of(texts[page["file"]]) != page["sha256"]:
            print(f"note: {page['file']} reads otherwise than when it was judged", file=sys.stderr)
    return digest_of("".join(digest_of(texts[page["file"]]) for page in PAGES))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    parser.add_argument("--record", action="store_true", help="write the pages' digests into pages.json")
    args = parser.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    for page in PAGES:
        installed = Path(page["installed"])
        if not installed.exists():
            raise SystemExit(f"{installed} is missing: apt-get install {page['package']}")
        shutil.copyfile(installed, args.out / page["file"])
    texts = read_pages(args.out)
    if args.record:
        for page in PAGES:
            page["sha256"] = digest_of(texts[page["file"]])
        (HERE / "pages.json").write_text(json.dumps(PAGES, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    digest = check_digests(texts)
    for page in PAGES:
        print(f"{page['file']}: {len(texts[page['file']]):,} characters ({page['package']} {page['version']})")
    print(f"pages digest {digest[:16]} in {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
