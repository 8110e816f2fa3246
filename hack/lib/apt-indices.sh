# Sourced by the scripts that build a root file system from the machine's
# Debian package indices (hack/conversion-image/build.sh,
# hack/build-cdi-images.sh). Both read $suite (the release's codename) and
# $arch (dpkg's architecture).

# apt_indices prints the machine's Debian package indices for its release,
# one line per index: "<list file> <InRelease file> <sources entry>".
apt_indices() {
  apt-get indextargets --format '$(FILENAME) $(BASE_URI) $(SOURCESENTRY) $(CODENAME)' \
    'Identifier: Packages' 'Origin: Debian' "Architecture: $arch" |
    while read -r file base entry codename; do
      case $codename in "$suite" | "$suite"-*) ;; *) continue ;; esac
      release=${base#*://}
      echo "$file /var/lib/apt/lists/${release//\//_}InRelease ${entry%:*}"
    done
}

# read_indices fills lists (each index's list and InRelease files) and
# sources (the sources entries, each once) from the machine's apt lists;
# it fails when they are missing (a fresh machine or container has none).
read_indices() {
  local line file release entry
  lists=() sources=()
  mapfile -t indices < <(apt_indices)
  [ ${#indices[@]} -gt 0 ] || return 1
  for line in "${indices[@]}"; do
    read -r file release entry <<<"$line"
    [ -f "$file" ] && [ -f "$release" ] || return 1
    lists+=("$file" "$release")
    [[ " ${sources[*]} " == *" $entry "* ]] || sources+=("$entry")
  done
}
