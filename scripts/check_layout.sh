#!/usr/bin/env bash
# Checks the folder layout that docs/structure.md describes, from the source tree alone.
#   ./scripts/check_layout.sh           # the include rules (fails), then untested sources (warns)
#   ./scripts/check_layout.sh --graph   # the include graph between folders, in Graphviz dot
#
# 1. Includes point down. Every "ferry/..." include is an arrow from the including file's folder to
#    the included file's folder; each folder has a level, and an arrow may only point to a lower
#    level or stay within its own folder:
#      base < memory < kernels < loader < runtime < (bench, fuzz, tests, ferry.h)
#    and inside loader/:
#      file_identifiers.h, internal/ < model/ < ferry/, executorch/, plan/ < program, program_mapping
#    where ferry/, executorch/ and plan/ stand side by side and include none of each other. A
#    layered graph has no cycle, so no separate cycle check is needed. Any arrow that breaks the
#    rules fails the script, naming the file, the line and both folders.
# 2. Sources without a test: for each base/, memory/, kernels/, loader/, runtime/ source with logic
#    (a .cc or .cu, not a no_*.cc stand-in or a per-CPU build of one loop file), the test that
#    mirrors it, tests/<folder>/<stem>_test.cc (or .cu; a folder's internal/ sources may be tested
#    beside its public ones). Missing ones are listed as warnings.
set -euo pipefail
cd "$(dirname "$0")/.."

# The folder a path's arrows are drawn from and to: loader/ by its sub-folders, the rest by their
# top folder.
folder_of() {
  local p=$1
  case "$p" in
    loader/model/*) echo loader/model ;;
    loader/ferry/*) echo loader/ferry ;;
    loader/executorch/*) echo loader/executorch ;;
    loader/plan/*) echo loader/plan ;;
    loader/internal/* | loader/file_identifiers.h) echo loader/internal ;;
    loader/*) echo loader ;;
    */*) echo "${p%%/*}" ;;
    *) echo "$p" ;;
  esac
}

level_of() {
  case "$1" in
    base) echo 0 ;;
    memory) echo 10 ;;
    kernels) echo 20 ;;
    loader/internal) echo 30 ;;
    loader/model) echo 31 ;;
    loader/ferry | loader/executorch | loader/plan) echo 32 ;;
    loader) echo 33 ;;
    runtime) echo 40 ;;
    *) echo 50 ;;  # bench, fuzz, tests, ferry.h: users of everything
  esac
}

sources() {
  git ls-files -- '*.h' '*.cc' '*.cu' '*.inc' | grep -v '^tests/packaging/consumer/'
}

if [ "${1:-}" = "--graph" ]; then
  echo "digraph ferry_includes {"
  sources | while read -r file; do
    from=$(folder_of "$file")
    { grep -o "#include \"ferry/[^\"]*\"" "$file" || true; } | sed 's/#include "ferry\///; s/"$//' |
      while read -r inc; do
        to=$(folder_of "$inc")
        [ "$from" != "$to" ] && echo "  \"$from\" -> \"$to\";"
      done
  done | sort -u || true
  echo "}"
  exit 0
fi

bad=0
while read -r file; do
  from=$(folder_of "$file")
  from_level=$(level_of "$from")
  while IFS=: read -r line inc; do
    inc=${inc#*\"ferry/}
    inc=${inc%\"*}
    to=$(folder_of "$inc")
    [ "$from" = "$to" ] && continue
    to_level=$(level_of "$to")
    if [ "$to_level" -gt "$from_level" ] || { [ "$to_level" -eq "$from_level" ] && [ "$from_level" -lt 50 ]; }; then
      echo "layout: $file:$line includes ferry/$inc: $from may not include $to (see docs/structure.md)"
      bad=1
    fi
  done < <(grep -n '#include "ferry/' "$file" || true)
done < <(sources)
if [ "$bad" -ne 0 ]; then
  echo "layout: includes that point up or sideways (above); the rules are in this script's header"
  exit 1
fi
echo "layout: every include points down"

untested=()
while read -r src; do
  case "$src" in
    */no_*.cc | */cuda/no_cuda_ops.cc | kernels/internal/simd_loops_*.cc | runtime/cli/ferry_main.cc) continue ;;
  esac
  stem=${src%.*}
  outer=${stem/internal\//}  # a folder's internal/ sources are tested beside its public ones
  if [ ! -f "tests/${stem}_test.cc" ] && [ ! -f "tests/${stem}_test.cu" ] &&
     [ ! -f "tests/${outer}_test.cc" ]; then
    untested+=("$src")
  fi
done < <(git ls-files -- 'base/*.cc' 'memory/*.cc' 'memory/*.cu' 'kernels/*.cc' 'kernels/*.cu' \
           'loader/*.cc' 'runtime/*.cc')
if [ ${#untested[@]} -gt 0 ]; then
  echo "layout: warning: ${#untested[@]} sources have no test at tests/<folder>/<stem>_test.cc:"
  printf '  %s\n' "${untested[@]}"
fi
