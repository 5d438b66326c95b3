"""Prints what spark-bench.test checks of a spark-bench --json file, a line
per row, load and profile: the numbers that are exact, and for the measured
ones whether they are there (and positive), so FileCheck reads one order."""
import json
import sys

with open(sys.argv[1]) as f:
    report = json.load(f)


def there(obj, key):
    return "yes" if isinstance(obj.get(key), (int, float)) and obj[key] > 0 else "no"


print("decode_weight_bytes", report["decode_weight_bytes"])
for row in report["rows"]:
    line = f"row {row['test']} threads {row['threads']}"
    assert row["tokens_per_second"] > 0, row
    if "depth" in row:
        line += f" depth {row['depth']} bytes_per_token {row['bytes_per_token']}"
    if "read_gb_per_second" in row:
        low, mean, high = (row["read_gb_per_second_min"], row["read_gb_per_second"],
                           row["read_gb_per_second_max"])
        ordered = 0 < low <= mean * 1.000001 and mean <= high * 1.000001
        line += (f" probes {row['bandwidth_probes']} bandwidth "
                 f"{'ordered' if ordered else 'NOT ordered'}"
                 f" pack {there(row, 'pack_read_gb_per_second')}")
    if "roofline_fraction" in row:
        line += f" roofline_fraction {there(row, 'roofline_fraction')}"
    print(line)
for load in report["loads"]:
    cached = load["pack_cached_fraction"]
    assert cached == -1 or 0 <= cached <= 1, load
    print(f"load threads {load['threads']} pack_cached_fraction {cached:g} "
          f"open_to_ready_ms {there(load, 'open_to_ready_ms')} "
          f"rss_anon_ready_bytes {there(load, 'rss_anon_ready_bytes')} background_verify "
          f"{'yes' if 'background_verify_ready_ms' in load and 'background_verify_verdict_ms' in load else 'no'}")
for profile in report["profiles"]:
    key = "tokens" if profile["phase"] == "prefill" else "depth"
    print(f"profile {profile['phase']} threads {profile['threads']} {key} {profile[key]} "
          f"ms_per_token {there(profile, 'ms_per_token')}")
    for line in profile["lines"]:
        print(f"line {line['part']} {line['kind']} calls {line['calls']}")
print("peak_rss_anon_bytes", there(report, "peak_rss_anon_bytes"))
