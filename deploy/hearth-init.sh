#!/bin/sh
# hearth-init: the one-shot service of docker-compose.yml that wires
# Mosquitto and Zigbee2MQTT to Hearth's generated accounts before any of
# them starts. It runs at every "docker compose up", so a rotated password
# reaches the broker and the bridge at the next up.
#
#  1. As the hearth user (10001), "hearthd -print-mosquitto-acl" writes the
#     passwords that are missing into /var/lib/hearth/credentials.yaml
#     (0600) and prints Mosquitto's dynamic-security JSON for every account
#     and its ACL, which goes to Mosquitto's data volume (owner mosquitto,
#     1883, mode 0600).
#  2. Zigbee2MQTT's account (services.$ZIGBEE_SERVICE of credentials.yaml)
#     goes to secret.yaml in Zigbee2MQTT's data volume (mode 0600), which
#     its configuration.yaml names with "!secret"; that configuration is
#     copied from deploy/zigbee2mqtt at the first start only.
#
# It runs as root only to hand each file to its owner; it has no network.
set -eu
umask 077

CONFIG=${CONFIG:-/etc/hearth/hearth.yaml}
DATA_DIR=${DATA_DIR:-/var/lib/hearth}
MOSQUITTO_DATA=${MOSQUITTO_DATA:-/mosquitto/data}
ZIGBEE2MQTT_DATA=${ZIGBEE2MQTT_DATA:-/zigbee2mqtt}
ZIGBEE_SERVICE=${ZIGBEE_SERVICE:-zigbee}
HEARTH_UID=10001
MOSQUITTO_UID=1883

as_hearth() { setpriv --reuid="$HEARTH_UID" --regid="$HEARTH_UID" --clear-groups -- "$@"; }

dynsec="$MOSQUITTO_DATA/dynamic-security.json"
as_hearth hearthd -config "$CONFIG" -data-dir "$DATA_DIR" -print-mosquitto-acl > "$dynsec.new"
chown "$MOSQUITTO_UID:$MOSQUITTO_UID" "$dynsec.new"
mv -f "$dynsec.new" "$dynsec"
echo "hearth-init: wrote Mosquitto's accounts and ACL to $dynsec"

credentials="$DATA_DIR/credentials.yaml"
credential() {
	awk -v want="services.$ZIGBEE_SERVICE.$1" -f /deploy/credential.awk "$credentials" || {
		echo "hearth-init: $credentials has no services.$ZIGBEE_SERVICE.$1 (is $ZIGBEE_SERVICE the zigbee2mqtt service of $CONFIG? a password set in the config itself must go into $ZIGBEE2MQTT_DATA/secret.yaml by hand)" >&2
		exit 1
	}
}
user=$(credential mqtt_username)
password=$(credential mqtt_password)
secret="$ZIGBEE2MQTT_DATA/secret.yaml"
printf '# Written by hearth-init from Hearth'"'"'s credentials.yaml at every start.\nmqtt_user: "%s"\nmqtt_password: "%s"\n' "$user" "$password" > "$secret.new"
mv -f "$secret.new" "$secret"
if [ ! -e "$ZIGBEE2MQTT_DATA/configuration.yaml" ]; then
	cp /deploy/zigbee2mqtt-configuration.yaml "$ZIGBEE2MQTT_DATA/configuration.yaml"
	echo "hearth-init: wrote Zigbee2MQTT's first configuration.yaml"
fi
echo "hearth-init: wrote Zigbee2MQTT's account ($user) to $secret"
