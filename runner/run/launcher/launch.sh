#!/bin/sh
# The runner's launcher: mounted read-only into the training container, never part of the
# entry's image. Its first line is the launch stamp the host starts the TTA clock from;
# then it becomes the entry's command, so everything the entry does is on the clock.
echo ':::RUNNER launch'
exec "$@"
