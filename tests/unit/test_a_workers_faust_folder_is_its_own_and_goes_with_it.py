"""faust's folder of a worker is the worker's own, and goes when the worker's process ends.

Contract (``app.runtime.faust_app.create_app``): faust makes folders in its ``datadir``
(empty with the memory store the worker uses); each process gets a temporary folder of
its own, never another replica's on the same host (same ``APP_ID``) nor the working
directory, and it is removed when the process exits, so a host's temporary directory
does not fill with one folder per app id ever run.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

PROGRAM = """
from app.registry import Registry
from app.runtime.faust_app import create_app
from app.settings import Settings

settings = Settings(
    database_url="sqlite+aiosqlite:///unused.db", broker_url="kafka://127.0.0.1:1"
)
for _ in range(2):
    app = create_app(settings, Registry())
    print(app.conf.datadir, app.conf.appdir)
"""


def test_each_process_has_its_own_folder_removed_at_exit(tmp_path: Path) -> None:
    env = {**os.environ, "TMPDIR": str(tmp_path), "APP_ID": "replicated-service"}
    runs = [
        subprocess.run(
            [sys.executable, "-c", PROGRAM],
            cwd=tmp_path,
            env=env,
            capture_output=True,
            text=True,
            check=True,
            timeout=60,
        ).stdout.split()
        for _ in range(2)
    ]

    datadirs = {Path(line) for run in runs for line in run[0::2]}
    assert len(datadirs) == 4, runs  # one per app made: never shared
    for run in runs:
        for datadir, appdir in zip(run[0::2], run[1::2], strict=True):
            assert Path(datadir).parent == tmp_path, datadir  # the temporary directory
            assert Path(appdir).is_relative_to(datadir), appdir  # where faust writes
    assert [p.name for p in tmp_path.iterdir()] == [], "left behind at exit"
