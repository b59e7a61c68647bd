#!/bin/sh
# Regenerates the upstream flag lists from git checkouts of the SMG repositories
# (smg-project/smg; lightseekorg/smg for the prefill-admission branch). See README.md.
# usage: regen.sh SMG_GIT_DIR LIGHTSEEKORG_SMG_GIT_DIR
set -eu
cd "$(dirname "$0")"
S=$1 L=$2
git -C "$S" show f8daa8835a8b4419b53125a837aaab2b3ce895c3:model_gateway/src/main.rs | python3 gen.py rust >smg-rust-f8daa8835.txt
git -C "$S" show f8daa8835a8b4419b53125a837aaab2b3ce895c3:bindings/python/src/smg/router_args.py | python3 gen.py python >smg-python-f8daa8835.txt
git -C "$S" show c7f9bf9f5:src/main.rs | python3 gen.py rust >classic-rust-c7f9bf9f5.txt
git -C "$S" show c7f9bf9f5:bindings/python/src/sglang_router/router_args.py | python3 gen.py python >classic-python-c7f9bf9f5.txt
git -C "$L" show 868f3264a:model_gateway/src/main.rs | python3 gen.py rust | grep -E -- "--prefill-(max-inflight|queue)" >smg-prefill-admission-868f3264a.txt
