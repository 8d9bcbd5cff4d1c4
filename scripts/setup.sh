# Sourced by test.sh and demo.sh: a .venv with torch, Triton (for the interpreter) and this package.
if [ ! -x .venv/bin/python ]; then
  python3 -m venv .venv
fi
. .venv/bin/activate
python -m pip install -q --disable-pip-version-check torch==2.13.0 triton==3.7.1 -e '.[test]'
