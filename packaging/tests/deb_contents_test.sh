#!/usr/bin/env bash
# Builds the .deb with `cpack -G DEB` in the build dir (the fixture of the
# other packaging tests) and checks its files, control fields, conffiles and
# maintainer scripts with dpkg-deb.
source "$(dirname "$0")/lib.sh"

cd "$INTENTD_BUILD_DIR" || fail "no build dir $INTENTD_BUILD_DIR"
rm -rf "$INTENTD_DEB_DIR"
# The `deb` target brings the binary, the configured units and the man pages
# up to date (a no-op after a full build), then runs cpack -G DEB.
say "building the package: cmake --build $INTENTD_BUILD_DIR --target deb  (cpack -G DEB -B $INTENTD_DEB_DIR)"
if ! cmake --build "$INTENTD_BUILD_DIR" --target deb >"$SCRATCH/cpack.log" 2>&1; then
  cat "$SCRATCH/cpack.log" >&2
  fail "building the .deb failed"
fi
DEB=$(find_deb)
mkdir -p "$SCRATCH/root"
dpkg-deb -x "$DEB" "$SCRATCH/root" || fail "dpkg-deb -x $DEB"
arch=$(dpkg --print-architecture)
expected_name="intentd_${INTENTD_VERSION}-1_${arch}.deb"
check "the package file is named $expected_name" test "$(basename "$DEB")" = "$expected_name"

# --- control fields -----------------------------------------------------------
field() { dpkg-deb -f "$DEB" "$1"; }
check "Package: intentd" test "$(field Package)" = intentd
check "Version: ${INTENTD_VERSION}-1 (from the project version)" test "$(field Version)" = "${INTENTD_VERSION}-1"
check "Architecture: $arch" test "$(field Architecture)" = "$arch"
check "Maintainer is set" test -n "$(field Maintainer)"
check "Section: admin" test "$(field Section)" = admin
check "Description has a summary and a long text" \
  bash -c '[ "$(dpkg-deb -f "$1" Description | wc -l)" -ge 2 ]' _ "$DEB"
depends=$(field Depends)
say "Depends: $depends"
# From dpkg-shlibdeps: the package of every shared library the binary needs.
needed=$(readelf -d "$SCRATCH/root/usr/bin/intentd" | sed -nE 's/.*\(NEEDED\).*\[(.*)\]/\1/p')
[ -n "$needed" ] || fail "readelf found no NEEDED entries in the binary"
ldconfig -p >"$SCRATCH/ldconfig"
for lib in $needed; do
  path=$(awk -v l="$lib" '$1 == l { print $NF; exit }' "$SCRATCH/ldconfig")
  [ -n "$path" ] || fail "ldconfig does not know $lib"
  # merged /usr: dpkg may know the file under /lib or /usr/lib, by either name.
  pkg=
  for p in "$path" "$(readlink -f "$path")" "/usr$path" "${path#/usr}"; do
    pkg=$(dpkg -S "$p" 2>/dev/null | head -1 | cut -d: -f1 || true)
    [ -z "$pkg" ] || break
  done
  [ -n "$pkg" ] || fail "no package owns $path ($lib)"
  check "Depends names $pkg (for $lib, from dpkg-shlibdeps)" \
    grep -qxF "$pkg" <<<"$(sed -E 's/ *\([^)]*\)//g; s/ *[,|] */\n/g' <<<"$depends")"
done
check "Depends lets the postinst make the user (adduser | systemd)" grep -qF "adduser | systemd" <<<"$depends"

# --- files --------------------------------------------------------------------
dpkg-deb -c "$DEB" >"$SCRATCH/contents" || fail "dpkg-deb -c"
# "perm owner/group size date time path" -> "perm owner path"
awk '{ p = $6; for (i = 7; i <= NF; i++) p = p " " $i; print $1, $2, p }' "$SCRATCH/contents" \
  >"$SCRATCH/listing"
has() {  # has MODE PATH
  grep -qxF -- "$1 root/root $2" "$SCRATCH/listing"
}
check "/usr/bin/intentd, 0755 root" has -rwxr-xr-x ./usr/bin/intentd
unit_dir=$(pkg-config --variable=systemdsystemunitdir systemd 2>/dev/null || echo /lib/systemd/system)
for unit in intentd.service intentd.socket; do
  check "$unit in $unit_dir, 0644 root" has -rw-r--r-- ".$unit_dir/$unit"
done
check "sysusers.d/intentd.conf" has -rw-r--r-- ./usr/lib/sysusers.d/intentd.conf
check "tmpfiles.d/intentd.conf" has -rw-r--r-- ./usr/lib/tmpfiles.d/intentd.conf
check "/etc/intentd/intentd.json" has -rw-r--r-- ./etc/intentd/intentd.json
for doc in README.md protocol.md key-derivation.md operations.md integrating.md; do
  check "/usr/share/doc/intentd/$doc" has -rw-r--r-- "./usr/share/doc/intentd/$doc"
done
for f in intentd-alerts.yml intentd-alerts.test.yml intentd-dashboard.json; do
  check "/usr/share/intentd/monitoring/$f" has -rw-r--r-- "./usr/share/intentd/monitoring/$f"
done
for page in intentd intentd-serve intentd-keygen intentd-derive intentd-ping intentd-begin; do
  check "man page $page(8), gzipped" has -rw-r--r-- "./usr/share/man/man8/$page.8.gz"
done
check_none "no secret is shipped (nothing under /etc/credstore, no key file)" \
  "$(grep -E 'credstore|hmac|[.]key$' "$SCRATCH/listing" || true)"
check_none "every file is owned by root/root" "$(awk '$2 != "root/root"' "$SCRATCH/listing")"
check_none "nothing is group/world-writable" \
  "$(awk 'substr($1,1,1) != "l" && (substr($1,6,1) == "w" || substr($1,9,1) == "w")' "$SCRATCH/listing")"
check_none "nothing under /usr/local or the build dir" \
  "$(grep -E "usr/local|$INTENTD_BUILD_DIR" "$SCRATCH/listing" || true)"

# --- control archive: conffiles and maintainer scripts ------------------------
ctrl=$SCRATCH/control
dpkg-deb -e "$DEB" "$ctrl" || fail "dpkg-deb -e"
check "conffiles lists exactly /etc/intentd/intentd.json" test "$(cat "$ctrl/conffiles")" = /etc/intentd/intentd.json
check "md5sums covers the binary" grep -q " usr/bin/intentd$" "$ctrl/md5sums"
for script in postinst prerm postrm; do
  check "$script is executable (0755)" test "$(stat -c %a "$ctrl/$script")" = 755
  check "$script parses with sh -n" sh -n "$ctrl/$script"
  if command -v shellcheck >/dev/null 2>&1; then
    check "$script passes shellcheck" shellcheck -s sh "$ctrl/$script"
  fi
done
check "postinst makes the secret with intentd keygen, never overwriting" \
  grep -qF '/usr/bin/intentd" keygen' "$ctrl/postinst"
check "postinst guards systemctl with [ -d /run/systemd/system ]" \
  grep -qF '[ -d /run/systemd/system ]' "$ctrl/postinst"

# --- the binary ---------------------------------------------------------------
if command -v file >/dev/null 2>&1; then
  check "the packaged binary is stripped" bash -c 'file "$1" | grep -q ", stripped"' _ "$SCRATCH/root/usr/bin/intentd"
fi
check "the packaged config is valid JSON listing the built-in action types" \
  "$PYTHON3" -c 'import json,sys; c=json.load(open(sys.argv[1])); assert {"pix.cobranca","email.cobranca"} <= set(c["action_types"]), c' \
  "$SCRATCH/root/etc/intentd/intentd.json"

done_ok
