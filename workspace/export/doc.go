// Package export writes a workspace as a runnable bundle: the app's files
// (the workspace as its sandbox sees it, ignored paths left out), its
// packages as requirements.txt or package.json dependencies, the command
// that runs it (given, or detected for Flask, FastAPI, Streamlit, npm start
// or a main script), a Dockerfile, a .dockerignore, a compose.yaml and a
// README with three ways to run it; and, for the "oci" format, an OCI image
// layout of it built without Docker on a base image layout
// (github.com/google/go-containerregistry).
//
// The package reads its input through Tree (a read-only file tree that
// never follows a symlink) and writes only below the destination; it
// imports nothing of cellbox. README.md says what a bundle holds and where
// base images are looked for.
package export
