#!/usr/bin/env bash
# gen_certs.sh DIR: a throwaway PKI for TLS tests, made with the openssl CLI (P-256 keys,
# valid 2 days): ca.{crt,key}; server.{crt,key} for 127.0.0.1 / ::1 / localhost
# (serverAuth); client.{crt,key} (clientAuth); and rogue_ca.crt with rogue_client.{crt,key},
# a client certificate from a CA the servers do not trust.
set -euo pipefail
dir=$1
mkdir -p "$dir"
cd "$dir"
key() { openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out "$1" 2>/dev/null; }
ca() {  # ca NAME CN
  key "$1.key"
  openssl req -x509 -new -key "$1.key" -out "$1.crt" -days 2 -subj "/CN=$2" \
    -addext "basicConstraints=critical,CA:TRUE" -addext "keyUsage=critical,keyCertSign,cRLSign"
}
leaf() {  # leaf NAME CA CN EXTENSIONS
  key "$1.key"
  openssl req -new -key "$1.key" -out "$1.csr" -subj "/CN=$3"
  printf '%s\n' "$4" > "$1.ext"
  openssl x509 -req -in "$1.csr" -CA "$2.crt" -CAkey "$2.key" -CAcreateserial -out "$1.crt" \
    -days 2 -extfile "$1.ext" 2>/dev/null
}
ca ca "tamp test CA"
ca rogue_ca "rogue CA"
leaf server ca localhost "subjectAltName=IP:127.0.0.1,IP:::1,DNS:localhost
extendedKeyUsage=serverAuth"
leaf client ca "tamp worker" "extendedKeyUsage=clientAuth"
leaf rogue_client rogue_ca "rogue worker" "extendedKeyUsage=clientAuth"
