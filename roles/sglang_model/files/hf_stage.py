# Copyright (c) 2026, k26deploy maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Download a Hugging Face model repository at a pinned commit into a directory on this host, once the space it
still needs is known to be free. Prints one JSON object: the repository's files as it describes them (expected:
name -> size, and sha256 for files kept in LFS, the git blob id, git_sha1, for the others), the bytes still to
download and the free bytes, and whether it downloaded. Exit status 3 when the disk cannot hold what is missing (nothing is downloaded then).

Usage: python hf_stage.py REPO REVISION LOCAL_DIR [--check] [--token-file PATH]
The hub's address comes from huggingface_hub's own environment (HF_ENDPOINT); a token from the file PATH (never
the command line or the environment, which other users and logs can see), else huggingface_hub's own configuration.
"""

import json
import os
import shutil
import sys

NO_SPACE = 3


def expected_files(siblings):
    """name -> {size[, sha256 | git_sha1]} of the repository's files (sha256 for LFS, else the git blob id), hidden
    ones (.gitattributes) left out as the model directory's verification leaves them out."""
    expected = {}
    for sibling in siblings:
        name = sibling.rfilename
        if any(part.startswith(".") for part in name.split("/")):
            continue
        entry = {"size": sibling.size}
        lfs = getattr(sibling, "lfs", None)
        if lfs is not None and getattr(lfs, "sha256", None):
            entry["sha256"] = lfs.sha256
        elif getattr(sibling, "blob_id", None):
            entry["git_sha1"] = sibling.blob_id  # outside LFS the hub names the file by its git blob id
        expected[name] = entry
    return expected


def missing_bytes(expected, local_dir):
    """Bytes of the expected files that the directory does not hold at their size yet."""
    missing = 0
    for name, entry in expected.items():
        path = os.path.join(local_dir, name)
        if not (os.path.isfile(path) and os.path.getsize(path) == entry["size"]):
            missing += entry["size"] or 0
    return missing


def free_bytes(path):
    """Free bytes of the file system that holds ``path`` (or would: its nearest directory that exists)."""
    while not os.path.exists(path):
        path = os.path.dirname(path)
    return shutil.disk_usage(path).free


def read_token(argv):
    """The token in the file named after --token-file, or None (huggingface_hub's own configuration decides)."""
    if "--token-file" not in argv:
        return None
    with open(argv[argv.index("--token-file") + 1], encoding="utf-8") as handle:
        return handle.read().strip() or None


def main(argv):
    repo, revision, local_dir = argv[:3]
    check_only = "--check" in argv[3:]
    token = read_token(argv[3:])
    from huggingface_hub import HfApi, snapshot_download  # pylint: disable=import-outside-toplevel
    info = HfApi(token=token).model_info(repo, revision=revision, files_metadata=True)
    expected = expected_files(info.siblings or [])
    report = {"expected": expected, "missing_bytes": missing_bytes(expected, local_dir),
              "free_bytes": free_bytes(local_dir), "downloaded": False}
    if report["missing_bytes"] > report["free_bytes"]:
        print(json.dumps(report))
        return NO_SPACE
    if report["missing_bytes"] and not check_only:
        snapshot_download(repo_id=repo, revision=revision, local_dir=local_dir, token=token)
        report["downloaded"] = True
    print(json.dumps(report))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
