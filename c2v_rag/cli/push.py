"""``c2v-rag push``: publish a variant on the Hugging Face Hub, or write what would be published."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from c2v_rag.cli.arguments import Subparsers


def add_parser(subparsers: Subparsers) -> argparse.ArgumentParser:
    parser = subparsers.add_parser("push", help="upload a variant to the Hugging Face Hub with a generated model card")
    parser.add_argument("variant", help="variant directory or preset name")
    parser.add_argument("repo_id", help="the Hub model repo, e.g. your-name/c2v-smollm2-scifact")
    parser.add_argument("--private", action="store_true", help="create the repo as private")
    parser.add_argument(
        "--license", default="apache-2.0", help="the licence to publish under (check your data's terms)"
    )
    parser.add_argument(
        "--dry-run",
        metavar="FOLDER",
        default=None,
        help="write what would be uploaded (card included) to FOLDER instead of uploading",
    )
    return parser


def run(args: argparse.Namespace) -> int:
    """Upload the variant and print its URL; with ``--dry-run``, list the files written instead."""
    from c2v_rag.hub.publish import prepare_upload, push_to_hub

    if args.dry_run:
        folder = prepare_upload(args.variant, args.dry_run, args.repo_id, license=args.license)
        print(f"wrote {folder} (not uploaded):")
        for path in sorted(p for p in folder.rglob("*") if p.is_file()):
            print(f"  {path.relative_to(folder)}  {path.stat().st_size:,} bytes")
        return 0
    url = push_to_hub(args.variant, args.repo_id, private=args.private, license=args.license)
    print(f"uploaded {args.variant} to {url}")
    return 0
