"""The local backend: shells and PTY programs as processes of this machine (in
a bubblewrap sandbox when the session has one), and the rc snapshot they
replay."""
