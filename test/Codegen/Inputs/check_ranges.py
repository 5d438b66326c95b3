"""Compares spark-fidelity --ranges-out's file (RANGES, by probe id) with the
calibration.json spark-compile --calib wrote from its own measurement of the
same probed build (CALIBRATION, by weight, paired through the probe build's
manifest input_probes): the same ranges (as f32), largest |x| and
per-channel importance. Prints one summary line."""
import json
import struct
import sys

with open(sys.argv[1]) as f:
    measured = json.load(f)
with open(sys.argv[2]) as f:
    probes = json.load(f)["input_probes"]
with open(sys.argv[3]) as f:
    calibration = json.load(f)


def f32(x):
    return struct.unpack("f", struct.pack("f", x))[0]


assert len(measured) == len(probes), (len(measured), len(probes))
for name, entry in zip(probes, measured):
    assert entry is not None, name
    assert 0 < entry["clip"] <= entry["max"], (name, entry)
    assert calibration["ranges"][name] == f32(entry["clip"]), name
    assert calibration["max"][name] == entry["max"], name
    ours = calibration["importance"][name]
    assert len(ours) == len(entry["importance"]) > 0, name
    assert all(o == f32(v) for o, v in zip(ours, entry["importance"])), name
print(f"{len(measured)} inputs agree")
