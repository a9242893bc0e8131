// export-z2m-definitions.mjs writes the bridge/devices entries of popular
// real Zigbee devices, as Zigbee2MQTT would publish them, from the device
// definitions of the zigbee-herdsman-converters package (the library
// Zigbee2MQTT takes its definitions from). Hearth's tests read the output
// (protocols/zigbee2mqtt/testdata/bridge_devices.json); no npm at test time.
//
// Regenerate (Node 20 or later; the package goes into a temporary
// directory and is never committed):
//
//   dir=$(mktemp -d) && (cd "$dir" && npm init -y >/dev/null && npm install zigbee-herdsman-converters@26.112.0)
//   node scripts/export-z2m-definitions.mjs "$dir/node_modules" \
//     > protocols/zigbee2mqtt/testdata/bridge_devices.json
//
// Each entry has the fields of Zigbee2MQTT's retained
// <base>/bridge/devices message (lib/extension/bridge.ts, publishDevices):
// ieee_address, friendly_name, type, supported, definition {model, vendor,
// description, exposes}. Exposes that depend on the device (a function in
// the definition) are computed for a device with no endpoints beyond those
// the definition names, as Zigbee2MQTT does before interview data exists.
import {readdirSync, readFileSync} from 'node:fs';
import {join} from 'node:path';
import {pathToFileURL} from 'node:url';

const modules = process.argv[2];
if (!modules) {
  console.error('usage: node export-z2m-definitions.mjs <node_modules dir>');
  process.exit(2);
}
const pkgDir = join(modules, 'zigbee-herdsman-converters');
const pkg = JSON.parse(readFileSync(join(pkgDir, 'package.json'), 'utf8'));
const zhc = await import(pathToFileURL(join(pkgDir, 'dist', 'index.js')).href);
// Every definition by model, from every vendor's file.
const byModel = new Map();
for (const file of readdirSync(join(pkgDir, 'dist', 'devices')).filter((f) => f.endsWith('.js') && f !== 'index.js')) {
  const mod = await import(pathToFileURL(join(pkgDir, 'dist', 'devices', file)).href);
  for (const def of mod.definitions ?? mod.default ?? []) {
    if (def && def.model && !byModel.has(def.model)) byModel.set(def.model, def);
  }
}

// [model, class, type] — class is Hearth's class the device would be
// configured with; type is the Zigbee device type Zigbee2MQTT reports.
const wanted = [
  // color bulbs
  ['9290022166', 'light', 'Router'],      // Philips Hue white and color ambiance E26/E27
  ['LED1624G9', 'light', 'Router'],       // IKEA TRADFRI color
  ['RB 285 C', 'light', 'Router'],        // Innr E27 color
  ['GL-C-008P', 'light', 'Router'],       // Gledopto RGB+CCT controller
  // white-spectrum bulbs
  ['LED1545G12', 'light', 'Router'],      // IKEA TRADFRI white spectrum
  ['9290022169', 'light', 'Router'],      // Philips Hue white ambiance E27
  ['8718699673147', 'light', 'Router'],   // Philips Hue white A60 (dimmable only)
  // TRVs and thermostats
  ['014G2461', 'climate', 'EndDevice'],   // Danfoss Ally
  ['SPZB0001', 'climate', 'EndDevice'],   // Eurotronic Spirit
  ['BTH-RA', 'climate', 'EndDevice'],     // Bosch radiator thermostat II
  ['SRTS-A01', 'climate', 'EndDevice'],   // Aqara E1 TRV
  ['TRVZB', 'climate', 'EndDevice'],      // Sonoff TRVZB
  ['TH1123ZB', 'climate', 'Router'],      // Sinopé line-volt thermostat
  // locks
  ['YRD226HA2619', 'lock', 'EndDevice'],  // Yale Assure
  ['BE468', 'lock', 'EndDevice'],         // Schlage Connect
  ['V3-BTZB/V3-BTZBE', 'lock', 'EndDevice'], // Danalock V3
  // covers and blinds
  ['E1757', 'cover', 'EndDevice'],        // IKEA FYRTUR
  ['ZNCLDJ11LM', 'cover', 'Router'],      // Aqara curtain
  ['TS130F', 'cover', 'Router'],          // Tuya curtain/blind switch
  ['ZNJLBL01LM', 'cover', 'EndDevice'],   // Aqara roller shade E1
  // plugs
  ['E160x/E170x/E190x', 'switch', 'Router'], // IKEA TRADFRI control outlet
  ['SP-EUC01', 'switch', 'Router'],       // Aqara smart plug EU
  ['S26R2ZB', 'switch', 'Router'],        // Sonoff smart plug
  ['TS011F_plug_1', 'switch', 'Router'],  // Tuya smart plug with metering
  // multi-endpoint switches
  ['TS0002', 'switch', 'Router'],         // Tuya 2-gang (state_l1, state_l2)
  ['TS0003', 'switch', 'Router'],         // Tuya 3-gang
  ['LLKZMK11LM', 'switch', 'Router'],     // Aqara 2-channel relay
  ['QBKG12LM', 'switch', 'Router'],       // Aqara double rocker, neutral (state_left, state_right)
];

// A device as far as a definition's exposes function looks at it.
function mockDevice(model) {
  const endpoint = (id) => ({ID: id, inputClusters: [], outputClusters: [], supportsInputCluster: () => false,
    supportsOutputCluster: () => false, getInputClusters: () => [], getOutputClusters: () => [], clusters: {}});
  return {ieeeAddr: '0x0', modelID: model, manufacturerName: '', endpoints: [endpoint(1), endpoint(2), endpoint(3)],
    getEndpoint: (id) => endpoint(id), customClusters: {}, isDummyDevice: false};
}

const out = [];
let n = 0;
for (const [model, hearthClass, type] of wanted) {
  if (!byModel.has(model)) throw new Error(`model ${model} is not defined in ${pkg.name}@${pkg.version}`);
  const def = zhc.prepareDefinition(byModel.get(model));
  let exposes = def.exposes;
  if (typeof exposes === 'function') exposes = exposes(mockDevice(model), {});
  n++;
  out.push({
    ieee_address: '0x' + (0xa4c1380000000000n + BigInt(n)).toString(16).padStart(16, '0'),
    friendly_name: `${hearthClass}/${model.replace(/[^A-Za-z0-9]+/g, '_').toLowerCase()}`,
    type,
    supported: true,
    hearth_class: hearthClass,
    definition: {
      model: def.model,
      vendor: def.vendor,
      description: def.description,
      exposes: JSON.parse(JSON.stringify(exposes)),
    },
  });
}
process.stdout.write(JSON.stringify({
  generator: 'scripts/export-z2m-definitions.mjs',
  package: `${pkg.name}@${pkg.version}`,
  devices: out,
}, null, 1) + '\n');
