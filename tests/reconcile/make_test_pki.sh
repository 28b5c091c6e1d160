#!/usr/bin/env bash
# Generates a throw-away PKI for the Pix test server (tests/reconcile/pix_server.py)
# into DIR, with the openssl command. Nothing here is a secret worth keeping: it
# is made fresh at test time and trusted only by the tests.
#
#   ca.pem, ca.key                 test CA
#   server.pem, server.key         server cert, CN=localhost, SAN DNS:localhost, IP:127.0.0.1
#   client.pem, client.key         client cert (CN=intentd-test-client), signed by the CA
#   rogue-ca.pem, rogue-ca.key     a second, unrelated CA
#   rogue-server.pem/.key          same names as server.pem, signed by the rogue CA
#   rogue-client.pem/.key          same CN as client.pem, signed by the rogue CA
#
# EC P-256 keys, mode 0600; certificates 0644. Quiet unless openssl fails.
# Usage: make_test_pki.sh DIR
set -euo pipefail

if [[ $# -ne 1 ]]; then
  echo "usage: $0 DIR" >&2
  exit 2
fi
dir=$1
mkdir -p -- "$dir"
cd -- "$dir"
umask 077

work=$(mktemp -d "${TMPDIR:-/tmp}/pix-pki.XXXXXX")
trap 'rm -rf -- "$work"' EXIT

# A self-contained configuration, so that the system's openssl.cnf (and
# $OPENSSL_CONF) add no extensions of their own.
cnf=$work/openssl.cnf
cat >"$cnf" <<'CNF'
[req]
distinguished_name = dn
prompt = no
[dn]
CN = unused
[ca_ext]
basicConstraints = critical, CA:TRUE, pathlen:0
keyUsage = critical, keyCertSign, cRLSign
subjectKeyIdentifier = hash
[server_ext]
basicConstraints = critical, CA:FALSE
keyUsage = critical, digitalSignature
extendedKeyUsage = serverAuth
subjectAltName = DNS:localhost, IP:127.0.0.1
subjectKeyIdentifier = hash
authorityKeyIdentifier = keyid:always
[client_ext]
basicConstraints = critical, CA:FALSE
keyUsage = critical, digitalSignature
extendedKeyUsage = clientAuth
subjectKeyIdentifier = hash
authorityKeyIdentifier = keyid:always
CNF
export OPENSSL_CONF=$cnf

# Runs a command, showing its output only when it fails.
quiet() {
  local out
  if ! out=$("$@" 2>&1); then
    printf '%s\n' "$out" >&2
    echo "make_test_pki.sh: failed: $*" >&2
    return 1
  fi
}

newkey() {  # newkey FILE
  quiet openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out "$1"
  chmod 600 "$1"
}

serial() { echo "0x$(openssl rand -hex 15)"; }

make_ca() {  # make_ca NAME CN
  newkey "$1.key"
  quiet openssl req -config "$cnf" -new -x509 -key "$1.key" -out "$1.pem" \
    -subj "/O=intentd tests/CN=$2" -days 3650 -sha256 -extensions ca_ext \
    -set_serial "$(serial)"
  chmod 644 "$1.pem"
}

make_leaf() {  # make_leaf NAME CN CA EXT
  newkey "$1.key"
  quiet openssl req -config "$cnf" -new -key "$1.key" -out "$work/$1.csr" \
    -subj "/O=intentd tests/CN=$2"
  quiet openssl x509 -req -in "$work/$1.csr" -CA "$3.pem" -CAkey "$3.key" \
    -set_serial "$(serial)" -days 825 -sha256 -extfile "$cnf" -extensions "$4" \
    -out "$1.pem"
  chmod 644 "$1.pem"
}

make_ca ca "intentd test CA"
make_leaf server localhost ca server_ext
make_leaf client intentd-test-client ca client_ext

make_ca rogue-ca "intentd rogue test CA"
make_leaf rogue-server localhost rogue-ca server_ext
make_leaf rogue-client intentd-test-client rogue-ca client_ext
