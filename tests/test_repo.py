"""Repository hygiene: no upstream code is ever tracked."""
from __future__ import annotations

import subprocess
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def test_no_vendored_file_is_tracked() -> None:
    tracked = subprocess.run(["git", "-C", str(REPO), "ls-files", "vendor/nano-vllm/"], capture_output=True,
                             text=True, check=True).stdout.split()
    assert tracked == []


def test_vendor_folder_is_ignored() -> None:
    run = subprocess.run(["git", "-C", str(REPO), "check-ignore", "-q", "vendor/nano-vllm/nanovllm/llm.py"])
    assert run.returncode == 0
