#!/usr/bin/env bash
# Idempotent setup: Python venv + the package (editable), JVM jars through mvn, and with
# --test-services the Debian packages the tests start (PostgreSQL, Chromium, poppler).
# Every step is skipped when its stamp (a hash of its inputs) is current, so a second run
# takes about a second.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$(pwd)
PY=${PYTHON:-python3}
VENV=${RECKON_VENV:-$ROOT/.venv}
CACHE=${RECKON_CACHE:-$ROOT/.cache}
TEST_SERVICES=0
for arg in "$@"; do
  case "$arg" in
    --test-services) TEST_SERVICES=1 ;;
    *) echo "setup.sh: unknown argument '$arg' (allowed: --test-services)" >&2; exit 2 ;;
  esac
done
say() { printf '[setup] %s\n' "$*"; }
hash_of() { cat "$@" | sha256sum | cut -c1-16; }

# 1. Python environment.
if [ ! -x "$VENV/bin/python" ]; then
  say "creating virtual environment in $VENV"
  "$PY" -m venv "$VENV"
  "$VENV/bin/python" -m pip install -q --upgrade pip
fi
# The editable install maps top-level packages when it runs: a new package folder must
# trigger a reinstall just like a changed pyproject.toml.
want=$(hash_of pyproject.toml <(ls -d */__init__.py 2>/dev/null))
if [ "$(cat "$VENV/.reckon-stamp" 2>/dev/null)" != "$want" ]; then
  say "installing reckon and its pinned dependencies (first time: a few minutes)"
  "$VENV/bin/python" -m pip install -q -e ".[dev,bench]"
  echo "$want" > "$VENV/.reckon-stamp"
else
  say "python environment is current"
fi

# 2. JVM jars: Spark's extras (Delta, Kafka connector), a Kafka broker for tests, and the
#    Data Docs pages' browser assets (WebJars).
command -v mvn >/dev/null || { say "mvn not found: install Maven (apt-get install maven) and re-run"; exit 1; }
fetch_jars() {  # name, pom, includeArtifactIds ('' = all runtime deps)
  local name=$1 pom=$2 include=$3 dest="$CACHE/jars/$1"
  local stamp; stamp=$(hash_of "$pom" <(echo "$include"))
  if [ "$(cat "$dest/.stamp" 2>/dev/null)" = "$stamp" ]; then say "jars '$name' are current"; return; fi
  say "fetching jars '$name' with mvn into $dest"
  rm -rf "$dest.tmp" && mkdir -p "$dest.tmp"
  local extra=()
  [ -n "$include" ] && extra=("-DincludeArtifactIds=$include")
  # Maven 3.8 prints colour resets (ESC[0m) even with -q and style.color=never: dropped here
  # (pipefail keeps mvn's exit status)
  mvn -q -B -Dstyle.color=never -f "$pom" dependency:copy-dependencies -DincludeScope=runtime \
      -DoutputDirectory="$dest.tmp" "${extra[@]}" | sed -u $'s/\x1b\\[[0-9;]*m//g'
  echo "$stamp" > "$dest.tmp/.stamp"
  rm -rf "$dest" && mv "$dest.tmp" "$dest"
}
# Only what pyspark does not ship already: duplicating Spark's own jars (Jackson, Hadoop,
# log4j, Parquet) at other versions breaks class loading.
fetch_jars spark jvm/spark/pom.xml \
  "delta-spark_4.1_2.13,delta-storage,delta-kernel-api,delta-kernel-defaults,delta-kernel-unitycatalog,unitycatalog-client,unitycatalog-hadoop,spark-sql-kafka-0-10_2.13,spark-token-provider-kafka-0-10_2.13,kafka-clients,commons-pool2"
fetch_jars kafka-broker jvm/kafka-broker/pom.xml ""
# The GX Data Docs pages' browser assets (jQuery, Bootstrap, bootstrap-table, ...) as WebJars,
# so the pages open without internet (audits/datadocs.py copies them into the site).
fetch_jars datadocs jvm/datadocs/pom.xml ""

# 2b. reckon's own JVM code (jvm/parse: the one-pass line parser, a Spark UDF), compiled with
#     javac against the jars pyspark ships, so it always matches the Spark that runs it.
build_reckon_jar() {
  local jars; jars=$("$VENV/bin/python" -c 'import pyspark, os; print(os.path.join(os.path.dirname(pyspark.__file__), "jars"))')
  local dest="$CACHE/jars/reckon" sources; sources=$(find jvm/parse/src -name '*.java' | sort)
  local stamp; stamp=$(hash_of $sources <(ls "$jars"))
  if [ "$(cat "$dest/.stamp" 2>/dev/null)" = "$stamp" ]; then say "reckon's JVM code is current"; return; fi
  command -v javac >/dev/null || { say "javac not found: install a JDK 17 (apt-get install openjdk-17-jdk-headless) and re-run"; exit 1; }
  say "compiling reckon's JVM code (jvm/parse) into $dest"
  local cp="$jars/*"   # every jar pyspark ships (javac expands the wildcard)
  rm -rf "$dest.tmp" && mkdir -p "$dest.tmp/classes"
  # shellcheck disable=SC2086
  # -path: the Class-Path entries in some jars name files pyspark does not ship
  javac --release 17 -Xlint:all,-path -Werror -d "$dest.tmp/classes" -cp "$cp" $sources
  jar cf "$dest.tmp/reckon-jvm.jar" -C "$dest.tmp/classes" . && rm -rf "$dest.tmp/classes"
  echo "$stamp" > "$dest.tmp/.stamp"
  rm -rf "$dest" && mv "$dest.tmp" "$dest"
}
build_reckon_jar

# 2c. the driver JVM's class-data archive (spark/class_archive.py, app/jvm_archive.py): Spark's, Delta's and
#     reckon's classes parsed once here instead of at every JVM start; trained again only
#     when a jar or the JDK changes.
"$VENV/bin/python" -m app.jvm_archive build

# 3. Services the tests start on loopback (Debian packages), only when asked.
if [ "$TEST_SERVICES" = 1 ]; then
  need=()
  [ -x /usr/lib/postgresql/*/bin/initdb ] 2>/dev/null || ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || need+=(postgresql)
  command -v chromium >/dev/null || need+=(chromium)
  command -v pdftoppm >/dev/null || need+=(poppler-utils)
  if [ ${#need[@]} -gt 0 ]; then
    SUDO=""; [ "$(id -u)" = 0 ] || SUDO="sudo"
    say "installing Debian packages: ${need[*]}"
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
    # The Debian package starts a cluster as a service; tests run their own on loopback.
    $SUDO service postgresql stop >/dev/null 2>&1 || true
  else
    say "test services (postgresql, chromium, poppler-utils) are installed"
  fi
fi
say "done"
