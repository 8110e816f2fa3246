# Sourced by the scripts that build an upstream component into a cache
# outside the clone (hack/build-cdi.sh, hack/build-coredns.sh,
# hack/build-kubevirt.sh; hack/build-kubevirt-node.sh takes its lock).

# take_build_lock <cache root> <what> makes one build at a time per cache:
# it holds an exclusive lock on <cache root>/.lock on file descriptor 9
# until the script exits, so a second caller waits here and then finds the
# build in place. Without flock it takes no lock.
take_build_lock() {
  local cache_root=$1 what=$2
  mkdir -p "$cache_root"
  if command -v flock >/dev/null; then
    exec 9>"$cache_root/.lock"
    echo "waiting for the $what build lock $cache_root/.lock" >&2
    flock 9
  fi
}

# build_binary <binary> <package> builds package (a path the tools module
# $tools resolves) static into $dir.tmp/<binary> with $ldflags, unless an
# earlier, interrupted run already did, and records its time and size in
# $dir.tmp/times.
build_binary() {
  local bin=$1 pkg=$2
  [ -x "$dir.tmp/$bin" ] && return 0
  local t=$SECONDS
  (cd "$tools" && CGO_ENABLED=0 go build -mod=readonly -trimpath -ldflags "$ldflags" \
    -o "$dir.tmp/$bin" "$pkg")
  echo "built $bin in $((SECONDS - t))s" >&2
  echo "$bin $((SECONDS - t))s $(stat -c %s "$dir.tmp/$bin") bytes" >>"$dir.tmp/times"
}

# check_module <binary> <module> <version> removes a binary in $dir.tmp
# whose embedded build information does not name module at version
# (truncated by a full disk, a stale leftover), and fails, so it never
# enters the cache.
check_module() {
  local bin=$1 mod=$2 version=$3
  if ! go version -m "$dir.tmp/$bin" 2>/dev/null | grep -qE "^[[:space:]]+mod[[:space:]]+$mod[[:space:]]+$version[[:space:]]"; then
    echo "$bin is not a build of $mod $version: removed, run again" >&2
    rm -f "$dir.tmp/$bin"
    exit 1
  fi
}
