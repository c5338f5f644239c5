# Shared by the shell tests (source it after setting `tmp` and `failures=0`).

# expect CODE PATTERN -- command...: exit code CODE and PATTERN (extended
# regex) somewhere in stdout+stderr; a command gets 200 s.
expect() {
  local code=$1 pattern=$2
  shift 3
  local rc
  timeout 200 "$@" >"$tmp/expect.out" 2>&1
  rc=$?
  if [[ $rc -ne $code ]] || ! grep -qE -- "$pattern" "$tmp/expect.out"; then
    echo "FAIL: $* -> exit $rc (want $code), pattern '$pattern'"
    tail -20 "$tmp/expect.out"
    failures=$((failures + 1))
  else
    echo "ok: $*"
  fi
}

# check DESCRIPTION PYTHON-SNIPPET ARGS...: the snippet's asserts must hold.
check() {
  local what=$1 code=$2
  shift 2
  if python3 -c "$code" "$@"; then echo "ok: $what"; else echo "FAIL: $what"; failures=$((failures + 1)); fi
}
