#!/usr/bin/env bash
# Every relative link in the repository's Markdown files ([text](path) with no scheme) must name a
# file or folder that exists. Prints each broken link and a count; exits 1 if any is broken.
#   scripts/check-doc-links.sh [REPO_DIR]
set -euo pipefail
cd "${1:-$(dirname "$0")/..}"
checked=0
broken=0
while IFS= read -r file; do
  while IFS= read -r link; do
    [[ -z $link || $link =~ ^[a-z]+: ]] && continue
    checked=$((checked + 1))
    if [[ ! -e "$(dirname "$file")/$link" ]]; then
      echo "$file: broken link $link"
      broken=$((broken + 1))
    fi
  done < <(grep -o '](\([^)#]*\)[^)]*)' "$file" | sed 's/](\([^)#]*\).*/\1/')
done < <( (git ls-files '*.md'; git ls-files --others --exclude-standard '*.md') | sort -u)
echo "check-doc-links: $checked relative links, $broken broken"
[[ $broken -eq 0 ]]
