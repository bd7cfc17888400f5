"""edit_manifest.py SRC DST PATH JSON: copies checkpoint directory SRC to
DST and sets the manifest field at dotted PATH (list indices as numbers) to
the JSON value given."""
import json
import shutil
import sys

src, dst, path, value = sys.argv[1:5]
shutil.copytree(src, dst)
m = json.load(open(f"{dst}/manifest.json"))
keys = path.split(".")
# Parameter names contain dots: match the longest key present at each level.
node, i = m, 0
while i < len(keys) - 1:
    for j in range(len(keys) - 1, i, -1):
        k = ".".join(keys[i:j])
        if isinstance(node, dict) and k in node:
            node, i = node[k], j
            break
        if isinstance(node, list) and k.isdigit():
            node, i = node[int(k)], j
            break
    else:
        sys.exit(f"no field {path}")
last = keys[-1]
if isinstance(node, list):
    node[int(last)] = json.loads(value)
else:
    node[last] = json.loads(value)
json.dump(m, open(f"{dst}/manifest.json", "w"))
