"""The requirements a wheel declares for one extra (its METADATA), as a pip requirements file on stdout."""

import sys
import zipfile
from email.parser import Parser


def main(wheel: str, extra: str) -> None:
    with zipfile.ZipFile(wheel) as zf:
        (name,) = [n for n in zf.namelist() if n.endswith(".dist-info/METADATA")]
        meta = Parser().parsestr(zf.read(name).decode())
    for req in meta.get_all("Requires-Dist") or []:
        spec, _, marker = req.partition(";")
        if "extra ==" not in marker:
            print(req)
        elif marker.strip() in (f'extra == "{extra}"', f"extra == '{extra}'"):
            print(spec.strip())


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
