"""Apache Kafka's jars from Maven Central, fetched once into a cache folder.

The broker of the tests, the benchmark, the soak and ``python -m app broker`` is
Apache Kafka itself, run from the jars Maven Central publishes: the broker
(``kafka_2.13``), the tools module the release tarball draws its classpath from,
and a log4j2 binding (the broker declares only ``slf4j-api``). Maven resolves them
into ``~/.cache/effectively-once/kafka-<version>`` (``EO_KAFKA_HOME`` elsewhere); a
folder that holds them already is used as it is, without Maven.
"""

from __future__ import annotations

import fcntl
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

KAFKA_VERSION = "4.1.1"
_LOG4J_VERSION = "2.24.3"
# The log4j2 binding needs slf4j 2; the broker's own dependency would bring 1.7.
_SLF4J_VERSION = "2.0.17"

_ARTIFACTS = (
    ("org.apache.kafka", "kafka_2.13", KAFKA_VERSION),
    ("org.apache.kafka", "kafka-tools", KAFKA_VERSION),
    ("org.apache.logging.log4j", "log4j-api", _LOG4J_VERSION),
    ("org.apache.logging.log4j", "log4j-core", _LOG4J_VERSION),
    ("org.apache.logging.log4j", "log4j-slf4j2-impl", _LOG4J_VERSION),
    ("org.slf4j", "slf4j-api", _SLF4J_VERSION),
)
_COMPLETE = ".complete"


class KafkaUnavailable(RuntimeError):
    """Java or Maven is missing, or Maven could not resolve the jars."""


def kafka_home() -> Path:
    """The folder that holds (or will hold) this version's jars."""
    root = os.environ.get("EO_KAFKA_HOME")
    if root:
        return Path(root) / f"kafka-{KAFKA_VERSION}"
    return Path.home() / ".cache" / "effectively-once" / f"kafka-{KAFKA_VERSION}"


def java_binary() -> str:
    """``java`` on the PATH (Java 17 or newer), or a clear ``KafkaUnavailable``."""
    java = shutil.which("java")
    if java is None:
        raise KafkaUnavailable("Apache Kafka needs Java 17 or newer: no `java` on the PATH")
    return java


def _pom() -> str:
    dependencies = "\n".join(
        f"    <dependency><groupId>{g}</groupId><artifactId>{a}</artifactId>"
        f"<version>{v}</version></dependency>"
        for g, a, v in _ARTIFACTS
    )
    return f"""<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>effectively-once</groupId>
  <artifactId>local-kafka</artifactId>
  <version>1</version>
  <packaging>pom</packaging>
  <dependencies>
{dependencies}
  </dependencies>
</project>
"""


def kafka_classpath() -> str:
    """The broker's classpath (``DIR/*``), resolving the jars first if they are missing."""
    java_binary()
    home = kafka_home()
    jars = home / "libs"
    if (home / _COMPLETE).exists():
        return f"{jars}/*"
    mvn = shutil.which("mvn")
    if mvn is None:
        raise KafkaUnavailable(
            "Apache Kafka's jars are fetched with Maven: no `mvn` on the PATH"
            f" (or put them in {jars})"
        )
    home.mkdir(parents=True, exist_ok=True)
    # One process fetches; the others wait for it and find the folder complete.
    with open(home / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not (home / _COMPLETE).exists():
            _fetch(mvn, home, jars)
    return f"{jars}/*"


def _fetch(mvn: str, home: Path, jars: Path) -> None:
    with tempfile.TemporaryDirectory(dir=home) as work:
        (Path(work) / "pom.xml").write_text(_pom())
        staged = Path(work) / "libs"
        done = subprocess.run(
            [mvn, "-q", "-B", "-U", "dependency:copy-dependencies", f"-DoutputDirectory={staged}"],
            cwd=work,
            capture_output=True,
            text=True,
        )
        if done.returncode != 0:
            said = (done.stdout + done.stderr).strip().splitlines()
            raise KafkaUnavailable(
                "Maven could not fetch Apache Kafka's jars: " + (said[-1] if said else "no output")
            )
        shutil.rmtree(jars, ignore_errors=True)
        staged.rename(jars)
        (home / _COMPLETE).touch()
