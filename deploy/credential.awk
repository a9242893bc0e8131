# credential.awk: print one value of Hearth's credentials.yaml, by its
# dotted path, for hearth-init.sh:
#
#   awk -v want=services.zigbee.mqtt_password -f credential.awk credentials.yaml
#
# It reads the YAML hearthd writes (mappings in block style at any indent,
# or one flow mapping "{k: v, k: v}" per line; plain, '...' or "..."
# scalars without escapes; "#" comments), which is all that file holds:
# names and base64url passwords. Exit status 1 when the path is not there.
function trim(s) { sub(/^[ \t]+/, "", s); sub(/[ \t]+$/, "", s); return s }
function unquote(s) {
	if (s ~ /^".*"$/ || s ~ /^'.*'$/) s = substr(s, 2, length(s) - 2)
	return s
}
function emit(path, value) {
	if (path == want) { print value; found = 1; exit }
}
{
	line = $0
	sub(/[ \t]+#.*$/, "", line)
	if (line ~ /^[ \t]*(#|$)/) next
	match(line, /^ */); ind = RLENGTH
	rest = substr(line, ind + 1)
	c = index(rest, ":")
	if (c == 0) next
	key = unquote(trim(substr(rest, 1, c - 1)))
	value = trim(substr(rest, c + 1))
	while (depth > 0 && indent[depth] >= ind) depth--
	depth++; indent[depth] = ind; name[depth] = key
	path = name[1]
	for (i = 2; i <= depth; i++) path = path "." name[i]
	if (value ~ /^\{.*\}$/) {
		n = split(substr(value, 2, length(value) - 2), parts, ",")
		for (i = 1; i <= n; i++) {
			c = index(parts[i], ":")
			if (c) emit(path "." unquote(trim(substr(parts[i], 1, c - 1))), unquote(trim(substr(parts[i], c + 1))))
		}
	} else if (value != "") {
		emit(path, unquote(value))
	}
}
END { if (!found) exit 1 }
