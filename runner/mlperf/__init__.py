"""MLPerf's formats: the training log (from the runner's own host-stamped records), the
system description (fingerprint plus the user's settings) and the submission tree."""
