#!/usr/bin/env bash
# pnp_train's command line: --help, --dry-run of the shipped configs, and input errors that
# exit with code 2 naming the key (and line).
#   check_cli.sh PNP_TRAIN INPUT_DIR SCRATCH_DIR
set -u
exe=$1 input=$2 scratch=$3
fail() { echo "FAIL: $*"; exit 1; }
"$exe" --help | grep -q "pnp_train CONFIG.toml" || fail "--help"
"$exe" --help-config | grep -q "sigma_max" || fail "--help-config"
for c in train_dncnn train_drunet_ct; do
  out=$("$exe" "$input/$c.toml" --dry-run) || fail "--dry-run $c"
  echo "$out" | tail -1
  echo "$out" | grep -q "^\[model\]" || fail "$c: no [model] in the effective config"
done
"$exe" "$input/train_dncnn.toml" --dry-run | grep -q "665921 parameters" || fail "DnCNN parameter count"
printf '[train]\nsteps = 10\n\n[noise]\nsigma = 0.1\n' > "$scratch/bad.toml"
msg=$("$exe" "$scratch/bad.toml" 2>&1); rc=$?
[ $rc -eq 2 ] || fail "unknown key: exit $rc, expected 2"
echo "$msg" | grep -q "bad.toml:5: unknown key 'noise.sigma'" || fail "unknown key message: $msg"
msg=$("$exe" "$input/train_dncnn.toml" --set train.lr=-1 2>&1); rc=$?
[ $rc -eq 2 ] || fail "out of range: exit $rc"
echo "$msg" | grep -q "train.lr: -1 is out of range" || fail "range message: $msg"
msg=$("$exe" 2>&1); rc=$?
[ $rc -eq 2 ] || fail "no config: exit $rc"
echo "pnp_train CLI checks passed"
