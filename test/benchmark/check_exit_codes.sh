#!/usr/bin/env bash
# pnp_bench's exit codes (moved from the doctest case when bench_main became apps/pnp_bench):
# --help 0; no configuration, a missing configuration file and an unknown flag 2.
#   check_exit_codes.sh PNP_BENCH
set -u
exe=$1
fail() { echo "FAIL: $*"; exit 1; }
expect() {  # code, args...
  local want=$1; shift
  "$exe" "$@" >/dev/null 2>&1
  local got=$?
  [ "$got" -eq "$want" ] || fail "pnp_bench $*: exit $got, expected $want"
  echo "pnp_bench $*: exit $got"
}
expect 0 --help
expect 2
expect 2 /nonexistent.toml
expect 2 --no-such-flag
echo "pnp_bench exit codes: ok"
