# Sourced by the collection's checks. scratch_collection SCRATCH: the files git tracks or would track, as they are
# in the working tree, copied to SCRATCH/ansible_collections/k26/deploy (the path ansible-test and antsibull-docs
# require; the checkout's own .collections link cannot serve, for they resolve the working directory to its real
# path), committed there as one commit. Prints that directory.
scratch_collection() {
  local coll=$1/ansible_collections/k26/deploy root
  root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
  mkdir -p "$coll"
  (cd "$root" && git ls-files -z --cached --others --exclude-standard | grep -zv '^\.collections/' \
    | while IFS= read -r -d '' path; do [[ -e $path || -L $path ]] && printf '%s\0' "$path"; done \
    | tar --null -T - -cf - | tar -xf - -C "$coll")
  (cd "$coll" && git init -q &&
    git -c user.name=sanity -c user.email=sanity@localhost.invalid add -A &&
    git -c user.name=sanity -c user.email=sanity@localhost.invalid commit -q -m sanity)
  printf '%s\n' "$coll"
}
