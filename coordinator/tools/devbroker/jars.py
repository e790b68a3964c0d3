"""Apache Kafka's jars for the dev broker: `pom.xml` beside this file, resolved from Maven Central
once and cached (`coordinator.tools.maven`; about 45 MB)."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path

from coordinator.tools import maven
from coordinator.tools.maven import java

POM = Path(__file__).with_name("pom.xml")
LOG4J_CONFIG = Path(__file__).with_name("log4j2.properties")


def kafka_version(pom: Path = POM) -> str:
    """The Apache Kafka version a pom pins."""
    version = ET.parse(pom).getroot().findtext("m:properties/m:kafka.version", namespaces=maven.NS)
    assert version, f"{pom} has no kafka.version property"
    return version


def libs() -> Path:
    """The directory holding the broker's jars, resolved first if not cached."""
    return maven.libs(POM, "kafka_2.13-*.jar", "Apache Kafka", name="kafka")


__all__ = ["LOG4J_CONFIG", "POM", "java", "kafka_version", "libs"]
