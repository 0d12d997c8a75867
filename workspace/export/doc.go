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
// never follows a symlink), holds only the few top-level files detection
// reads (bounded), and writes only below the destination, by path: the
// caller gives one that no sandbox can write (workspace.Export refuses
// the state directory and the open workspaces' directories). It imports
// nothing of cellbox. README.md says what a bundle holds and where
// base images are looked for.
package export
