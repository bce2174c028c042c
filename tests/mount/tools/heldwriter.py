#!/usr/bin/env python3
"""A writer that keeps its file open: writes SRC to FILE in 64 KiB writes, creates
GO.written, waits for GO to exist, then closes and prints "close ok" or "close failed:
ERROR". For stopping a daemon while a file is open on it (t_signal_stop, t_user_mount).

  heldwriter.py FILE SRC GO
"""
import os
import sys
import time

path, src, go = sys.argv[1:4]
fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
data = open(src, "rb").read()
for i in range(0, len(data), 65536):
    os.write(fd, data[i:i + 65536])
open(go + ".written", "w").close()
while not os.path.exists(go):
    time.sleep(0.05)
try:
    os.close(fd)
    print("close ok")
except OSError as e:
    print("close failed: %s" % e)
