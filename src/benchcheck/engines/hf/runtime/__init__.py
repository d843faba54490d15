"""Device plumbing: host-to-device copies that never wait, launch pacing."""
