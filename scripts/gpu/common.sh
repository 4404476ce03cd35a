# Sourced by the scripts in scripts/gpu/: where the GPU machine's CUDA libraries are, and what of
# gpu-carry/ (scripts/gpu/make_carry.sh) a program there needs. Bash; sets no options of its own.

# Whether nvidia-smi lists a GPU; its listing goes to $1.
gpu_present() {
  nvidia-smi -L > "$1" 2>&1 && grep -q '^GPU ' "$1"
}

# The folders Python's packages live in (the CUDA wheels: site-packages/nvidia/...).
python_sites() {
  python3 -c 'import site; print(" ".join(site.getsitepackages() + [site.getusersitepackages()]))' 2>/dev/null
}

# The path of a CUDA library (a soname such as libcublas.so.13, or a prefix such as libnvblas.so)
# on this machine, or nothing: the ld.so cache, the toolkit's folders, then the pip wheels.
find_cuda_lib() {
  local name=$1 path
  path=$(ldconfig -p 2>/dev/null | awk -v n="$name" 'index($1, n) == 1 { print $NF; exit }')
  if [ -z "$path" ]; then
    for dir in /usr/local/cuda/lib64 /usr/local/cuda/lib /usr/local/cuda/targets/x86_64-linux/lib; do
      path=$(ls "$dir/$name"* 2>/dev/null | head -1)
      [ -n "$path" ] && break
    done
  fi
  if [ -z "$path" ]; then
    # shellcheck disable=SC2046
    path=$(find $(python_sites) -path '*nvidia*' -name "$name*" 2>/dev/null | sort | head -1)
  fi
  [ -n "$path" ] && echo "$path"
}

# Unpacks gpu-carry/ for use: carry_open CARRY TMPDIR. Files ending in .xz (the large libraries)
# are decompressed into TMPDIR/<their folder>, with xz or, where the machine has none, Python's
# lzma; the others are linked there. TMPDIR/syslib gets links to those of gpu-carry/lib/ that the
# machine's loader does not know (libgfortran...): a library it has (libstdc++) stays the system's,
# which is at least as new as the carried one. Sets carry_dir=TMPDIR. Returns 1 when CARRY is
# missing.
carry_open() {
  local src=$1 dst=$2 f rel
  [ -d "$src" ] || return 1
  mkdir -p "$dst/syslib"
  while IFS= read -r f; do
    rel=${f#"$src"/}
    mkdir -p "$dst/$(dirname "$rel")"
    case $f in
      *.xz)
        if command -v xz > /dev/null; then
          xz -dc "$f" > "$dst/${rel%.xz}"
        else
          python3 -c 'import lzma, shutil, sys; shutil.copyfileobj(lzma.open(sys.argv[1]), open(sys.argv[2], "wb"))' \
            "$f" "$dst/${rel%.xz}"
        fi
        chmod +x "$dst/${rel%.xz}" ;;
      *) ln -sf "$f" "$dst/$rel" ;;
    esac
  done < <(find "$src" -type f)
  for f in "$dst"/lib/*; do
    [ -e "$f" ] || continue
    ldconfig -p 2>/dev/null | grep -q "^[[:space:]]*$(basename "$f") " || ln -sf "$f" "$dst/syslib/"
  done
  carry_dir=$dst
}
