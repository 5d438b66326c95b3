"""The installed package, as an application developer meets it.

`cmake --install` of this build into a temporary prefix, which is then moved
(an installed spark-compile must not depend on the folders it was built or
installed in), then test/package/app, a project that knows nothing but
find_package(Spark) and spark_add_model(), configured and built against it:
for the host (run, and compared with the installed spark-run on the same
model; rebuilt when the checkpoint changes; linked again through pkg-config)
and cross-compiled for arm64 with a CMake toolchain file (run under qemu).
SPARK_BUILD_DIR names the build (set by ctest).
"""

import os
import shutil
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
SOURCE = os.environ.get("SPARK_SOURCE_DIR", os.path.join(HERE, "..", ".."))
BUILD = os.environ.get("SPARK_BUILD_DIR", os.path.join(SOURCE, "build"))
APP = os.path.join(HERE, "app")
PROMPT = "1,5,9,13,17,21"  # the prompt main.c evaluates
PREDICT = "8"


def run(args, env=None, cwd=None):
    merged = dict(os.environ)
    merged.update(env or {})
    result = subprocess.run(args, capture_output=True, text=True, env=merged, cwd=cwd)
    if result.returncode != 0:
        raise AssertionError("%s failed (%d):\n%s%s" % (" ".join(args), result.returncode,
                                                        result.stdout, result.stderr))
    return result.stdout


class Package(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="spark-package-")
        installed = os.path.join(cls.tmp, "installed")
        run(["cmake", "--install", BUILD, "--prefix", installed])
        cls.prefix = os.path.join(cls.tmp, "moved")
        os.rename(installed, cls.prefix)
        cls.bin = os.path.join(cls.prefix, "bin")
        cls.ckpt = os.path.join(cls.tmp, "ckpt")
        run([os.path.join(cls.bin, "spark-mkmodel"), "-o", cls.ckpt, "--dtype", "f32"])

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def configure(self, name, *flags):
        build = os.path.join(self.tmp, name)
        run(["cmake", "-S", APP, "-B", build, "-G", "Ninja",
             "-DCMAKE_PREFIX_PATH=" + self.prefix, "-DSPARK_CHECKPOINT=" + self.ckpt, *flags])
        return build

    def expected_ids(self):
        """The installed spark-run on a host build of the same model."""
        out = os.path.join(self.tmp, "reference-build")
        if not os.path.isdir(out):
            run([os.path.join(self.bin, "spark-compile"), self.ckpt, "-o", out, "--quiet",
                 "--max-context", "128"])
        return run([os.path.join(self.bin, "spark-run"), out, "--prompt-ids", PROMPT,
                    "--n-predict", PREDICT]).split()

    def test_host_project(self):
        build = self.configure("host")
        log = run(["cmake", "--build", build])
        self.assertIn("spark-compile: hello_model (host)", log)
        pack = os.path.join(build, "hello_model", "model.spkw")
        output = run([os.path.join(build, "hello"), pack, PREDICT,
                      os.path.join(SOURCE, "models", "spark-nano")]).splitlines()
        print("\n".join(output))
        self.assertEqual(output[0].split(), self.expected_ids())
        # The text layer linked too: spark-nano's ids of "Hello".
        self.assertTrue(output[1].startswith("text: "), output)
        self.assertEqual(len(output[1].split()), 4)
        # Up to date: nothing rebuilt; a changed checkpoint: the model again.
        self.assertNotIn("spark-compile", run(["cmake", "--build", build]))
        os.utime(os.path.join(self.ckpt, "config.json"))
        self.assertIn("spark-compile: hello_model", run(["cmake", "--build", build]))
        # pkg-config, for other build systems: the same program, linked with
        # the flags spark.pc gives.
        flags = run(["pkg-config", "--cflags", "--libs", "spark"],
                    env={"PKG_CONFIG_PATH": os.path.join(self.prefix, "lib", "pkgconfig")})
        exe = os.path.join(self.tmp, "hello-pkg-config")
        run(["cc", "-std=c11", "-o", exe, os.path.join(APP, "main.c"),
             "-I", os.path.join(build, "hello_model"),
             os.path.join(build, "hello_model", "libspark_model.a"), *flags.split()])
        self.assertEqual(run([exe, pack, PREDICT]).split(), self.expected_ids())

    def test_arm64_project(self):
        for program in ("aarch64-linux-gnu-gcc", "qemu-aarch64-static"):
            if not shutil.which(program):
                print("[SKIP] %s is not installed" % program)
                return
        build = self.configure("arm64", "-DSPARK_TARGET_DEVICE=arm64",
                               "-DCMAKE_TOOLCHAIN_FILE=" +
                               os.path.join(HERE, "aarch64-linux-gnu.cmake"))
        self.assertIn("spark-compile: hello_model (arm64)", run(["cmake", "--build", build]))
        exe = os.path.join(build, "hello")
        self.assertIn("ARM aarch64", run(["file", exe]))
        output = run(["qemu-aarch64-static", "-cpu", "max", exe,
                      os.path.join(build, "hello_model", "model.spkw"), PREDICT])
        print(output)
        self.assertEqual(output.split(), self.expected_ids())

    def test_phone_agent_example(self):
        """examples/phone-agent against the installed package, with one
        build of spark-nano (the README's table has all four): its unit
        tests (a scripted model), then every held-out task with the model."""
        build = os.path.join(self.tmp, "phone-agent")
        run(["cmake", "-S", os.path.join(SOURCE, "examples", "phone-agent"), "-B", build,
             "-G", "Ninja", "-DCMAKE_BUILD_TYPE=Release", "-DCMAKE_PREFIX_PATH=" + self.prefix,
             "-DPHONE_AGENT_BUILDS=w8a16"])
        run(["cmake", "--build", build])
        print(run([os.path.join(build, "phone-agent-tests"), "--gtest_brief=1"]))
        report = os.path.join(build, "report.json")
        output = run([os.path.join(build, "phone-agent"), "--evaluate", "--threads", "2",
                      "--json", report])
        print(output)
        import json
        with open(report) as f:
            results = json.load(f)
        self.assertEqual(len(results), 18)
        self.assertEqual({r["failure"] for r in results}, {""})
        # The trained model completes some tasks end to end (measured: see the
        # example's README; a broken loop, template or build completes none).

        self.assertGreaterEqual(sum(r["success"] for r in results), 2, output)


if __name__ == "__main__":
    unittest.main()
