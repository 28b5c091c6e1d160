"""The offline install of README.md's "Install", run as documented.

Each test makes a fresh venv with Debian's interpreter, installs a copy of
this folder with exactly the README's commands while no index can be reached,
then imports the installed package from outside the source tree and calls a
real agent with it. A failure here means a payment host without internet
cannot install the client.

The interpreter is $INTENTD_VENV_PYTHON, else /usr/bin/python3 (Debian's:
the test is about what Debian 12 ships, not a pyenv or a CI image's Python).
It needs python3-venv, python3-pip-whl, python3-setuptools-whl,
python3-wheel-whl, python3-setuptools and python3-wheel
(scripts/install-deps.sh installs them).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.dirname(__file__))

from agent_process import AgentProcess  # noqa: E402

SOURCE = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
PYTHON = os.environ.get("INTENTD_VENV_PYTHON", "/usr/bin/python3")
DEBIAN_WHEELS = "/usr/share/python-wheels"

# Run in the venv, outside the source tree, isolated (-I: no PYTHONPATH, no
# user site, no current directory on sys.path): the package must come from
# the venv's site-packages.
CHECK = """
import json, sys
import intentd_client
from intentd_client import Client
with Client(sys.argv[1]) as c:
    pong = c.ping()
print(json.dumps({"file": intentd_client.__file__, "protocol": pong["protocol"]}))
"""


def offline_env(home: str) -> dict:
    """pip's environment with every way to an index closed."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith("PIP_") and k not in ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV")}
    env.update({
        "HOME": home,
        "PIP_NO_INDEX": "1",
        "PIP_CONFIG_FILE": os.devnull,       # no pip.conf adding an index or find-links
        "PIP_NO_CACHE_DIR": "1",             # build for real, no wheel from an earlier run
        "PIP_DISABLE_PIP_VERSION_CHECK": "1",
        # Should anything still try the network, it fails at once.
        "http_proxy": "http://127.0.0.1:9", "https_proxy": "http://127.0.0.1:9",
        "HTTP_PROXY": "http://127.0.0.1:9", "HTTPS_PROXY": "http://127.0.0.1:9",
    })
    return env


class OfflineInstall(unittest.TestCase):
    agent: AgentProcess

    @classmethod
    def setUpClass(cls) -> None:
        if not os.access(PYTHON, os.X_OK):
            raise AssertionError(f"{PYTHON} is missing: apt-get install python3 python3-venv "
                                 "(or set INTENTD_VENV_PYTHON)")
        cls.agent = AgentProcess().start()

    @classmethod
    def tearDownClass(cls) -> None:
        cls.agent.stop()
        cls.agent.cleanup()

    def setUp(self) -> None:
        self.tmp = tempfile.mkdtemp(prefix="intentd-install-")
        self.addCleanup(shutil.rmtree, self.tmp, True)
        # pip builds in the folder it is given: install from a copy, laid out
        # as in the repository, so that the command reads as documented.
        shutil.copytree(SOURCE, os.path.join(self.tmp, "clients", "python"),
                        ignore=shutil.ignore_patterns("build", "*.egg-info", "__pycache__"))
        self.env = offline_env(self.tmp)

    def run_step(self, argv, what: str) -> str:
        done = subprocess.run(argv, cwd=self.tmp, env=self.env, stdin=subprocess.DEVNULL,
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=180)
        out = done.stdout.decode("utf-8", "replace")
        self.assertEqual(done.returncode, 0, f"{what} failed: {' '.join(argv)}\n{out[-3000:]}")
        return out

    def check_installed(self, venv: str) -> None:
        out = self.run_step([os.path.join(venv, "bin", "python"), "-I", "-c", CHECK,
                             self.agent.socket], "the installed client")
        result = json.loads(out.strip().splitlines()[-1])
        site = os.path.join(os.path.realpath(venv), "lib")
        self.assertTrue(os.path.realpath(result["file"]).startswith(site), result["file"])
        self.assertEqual(result["protocol"], 1)

    def test_plain_venv_with_debians_wheels(self) -> None:
        if not os.path.isdir(DEBIAN_WHEELS):
            self.fail(f"{DEBIAN_WHEELS} is missing: apt-get install python3-pip-whl "
                      "python3-setuptools-whl python3-wheel-whl")
        venv = os.path.join(self.tmp, "venv")
        self.run_step([PYTHON, "-m", "venv", venv], "python3 -m venv")
        self.run_step([os.path.join(venv, "bin", "pip"), "install", "--no-index",
                       "--find-links", DEBIAN_WHEELS, "./clients/python"], "pip install")
        self.check_installed(venv)

    def test_venv_with_system_setuptools_without_build_isolation(self) -> None:
        venv = os.path.join(self.tmp, "venv")
        self.run_step([PYTHON, "-m", "venv", "--system-site-packages", venv],
                      "python3 -m venv --system-site-packages")
        pip = os.path.join(venv, "bin", "pip")
        self.run_step([pip, "install", "--no-index", "--no-build-isolation", "./clients/python"],
                      "pip install")
        self.check_installed(venv)
        # The wheel for another host: built here, installed into a venv that
        # sees no setuptools at all.
        self.run_step([pip, "wheel", "--no-index", "--no-build-isolation", "-w", "dist",
                       "./clients/python"], "pip wheel")
        other = os.path.join(self.tmp, "other-venv")
        self.run_step([PYTHON, "-m", "venv", other], "python3 -m venv")
        self.run_step([os.path.join(other, "bin", "pip"), "uninstall", "-y", "setuptools"],
                      "pip uninstall setuptools")
        wheels = [w for w in os.listdir(os.path.join(self.tmp, "dist")) if w.endswith(".whl")]
        self.assertEqual(len(wheels), 1, wheels)
        self.assertRegex(wheels[0], r"^intentd_client-[0-9.]+-py3-none-any\.whl$")
        self.run_step([os.path.join(other, "bin", "pip"), "install", "--no-index",
                       os.path.join("dist", wheels[0])], "pip install WHEEL")
        self.check_installed(other)


if __name__ == "__main__":
    unittest.main()
