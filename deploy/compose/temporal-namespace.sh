#!/bin/sh
# Registers the namespace Jam uses, once Temporal answers.
set -eu
ns="${NAMESPACE:-default}"
addr="${TEMPORAL_ADDRESS:-temporal:7233}"
tries=0
until temporal operator cluster health --address "$addr"; do
  tries=$((tries + 1))
  [ "$tries" -lt 60 ] || { echo "temporal at $addr did not become healthy"; exit 1; }
  sleep 2
done
temporal operator namespace describe -n "$ns" --address "$addr" >/dev/null 2>&1 ||
  temporal operator namespace create -n "$ns" --retention 72h --address "$addr"
echo "namespace $ns ready"
